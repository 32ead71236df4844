//! The current schema in two files a reader can open, each proved equal
//! to a migrated database: `migrations/current/functions.sql`, the body of
//! every database function, and `migrations/current/schema.sql`, what each
//! table holds ([`tables`]). Migrations stay append-only, so a function
//! rewritten or a table altered by a later migration has older copies in
//! history; these files are what the migrated database runs and holds, and
//! these tests prove it.
//!
//! After a migration, regenerate both with
//! `HOLDFAST_WRITE_SCHEMA=1 cargo test --test api schema::` and commit them
//! (`HOLDFAST_WRITE_FUNCTIONS=1`, the older name, does the same).

mod tables;

use std::path::Path;

use holdfast_testkit::TestDb;

const SNAPSHOT: &str = "migrations/current/functions.sql";
const SCHEMA: &str = "migrations/current/schema.sql";

/// The snapshot of a migrated database: its composite types and functions
/// in name order, each headed by the migration that last wrote it.
async fn snapshot(db: &TestDb) -> String {
    let types: Vec<(String, String)> = sqlx::query_as(
        "select t.typname::text,
                format(E'create type %I as (\\n%s\\n);', t.typname,
                       string_agg(format('    %I %s', a.attname, format_type(a.atttypid, a.atttypmod)),
                                  E',\\n' order by a.attnum))
           from pg_type t
           join pg_class c on c.oid = t.typrelid and c.relkind = 'c'
           join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
          where t.typnamespace = 'public'::regnamespace
          group by t.typname
          order by t.typname",
    )
    .fetch_all(&db.pool)
    .await
    .expect("composite types");
    let functions: Vec<(String, String)> = sqlx::query_as(
        "select p.proname::text, pg_get_functiondef(p.oid)
           from pg_proc p
          where p.pronamespace = 'public'::regnamespace
            and not exists (select 1 from pg_depend d
                             where d.objid = p.oid and d.deptype = 'e')
          order by p.proname, pg_get_function_identity_arguments(p.oid)",
    )
    .fetch_all(&db.pool)
    .await
    .expect("functions");

    let mut out = String::from(
        "-- GENERATED from the migrated database by tests/api/schema.rs: do not edit.\n\
         -- The current composite types and function bodies, whichever migration\n\
         -- last wrote them; the tables are in schema.sql. Regenerate both after a\n\
         -- migration:\n\
         --   HOLDFAST_WRITE_SCHEMA=1 cargo test --test api schema::\n",
    );
    for (name, definition) in types {
        out.push_str(&format!(
            "\n-- type {name} ({})\n{definition}\n",
            last_written_by("type", &name)
        ));
    }
    for (name, definition) in functions {
        out.push_str(&format!(
            "\n-- {name} ({})\n{};\n",
            last_written_by("function", &name),
            definition.trim_end()
        ));
    }
    out
}

/// The newest migration that creates or replaces `kind name`.
fn last_written_by(kind: &str, name: &str) -> String {
    migrations_saying(&[
        format!("create {kind} {name}"),
        format!("create or replace {kind} {name}"),
    ])
    .pop()
    .map(|file| format!("last written by {file}"))
    .unwrap_or_else(|| "not written by a migration".to_owned())
}

/// The migrations (file names, oldest first) whose text holds one of
/// `patterns` (lower case) followed by the end of a name: `create table
/// holds` is not found in `create table holds_archive`.
fn migrations_saying(patterns: &[String]) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir("migrations")
        .expect("migrations folder")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path)
                .unwrap_or_default()
                .to_lowercase();
            patterns.iter().any(|p| {
                text.match_indices(p.as_str()).any(|(at, _)| {
                    // the whole name, not a longer one that starts with it
                    !text[at + p.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                })
            })
        })
        .filter_map(|path| path.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .collect()
}

/// Writes `current` to `path` when asked to (either switch), then proves
/// the committed file equal to it.
fn prove(path: &str, current: &str) {
    let path = Path::new(path);
    let write = ["HOLDFAST_WRITE_SCHEMA", "HOLDFAST_WRITE_FUNCTIONS"]
        .iter()
        .any(|switch| std::env::var_os(switch).is_some());
    if write {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, current).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == current,
        "{} differs from the migrated database: regenerate it with \
         HOLDFAST_WRITE_SCHEMA=1 cargo test --test api schema:: and commit it",
        path.display()
    );
}

#[tokio::test]
async fn the_function_snapshot_is_what_the_migrated_database_runs() {
    let db = TestDb::new().await;
    prove(SNAPSHOT, &snapshot(&db).await);
}

#[tokio::test]
async fn the_schema_file_is_what_the_migrated_database_holds() {
    let db = TestDb::new().await;
    let unshown = tables::unshown(&db).await;
    assert!(
        unshown.is_empty(),
        "the database holds what {SCHEMA} cannot show yet (teach tests/api/schema/tables.rs): \
         {unshown:?}"
    );
    prove(SCHEMA, &tables::snapshot(&db).await);
}

/// Every table, sequence, view and type in the schema file names the
/// migration that made it, and a change to a table shows in the file.
#[tokio::test]
async fn the_schema_file_names_what_made_each_table_and_sees_a_change() {
    let db = TestDb::new().await;
    let before = tables::snapshot(&db).await;
    let unnamed: Vec<&str> = before
        .lines()
        .filter(|line| line.starts_with("-- ") && line.contains("(not made by a migration)"))
        .collect();
    assert!(unnamed.is_empty(), "made by no migration: {unnamed:?}");
    assert!(before.contains("\n-- table holds (made by 0001_inventory_schema.sql"));
    assert!(before.contains("\n-- sequence waitlist_line (made by 0070_waiting_list.sql)"));
    // a table renamed since is headed by where it was made, under its first name
    assert!(before.contains(
        "\n-- table schedules (made by 0019_staff_run_the_sale.sql as pickup_schedules; renamed by"
    ));
    // what a change to the database looks like in the file
    sqlx::raw_sql(
        "alter table holds add column note text not null default ''; \
         comment on column holds.note is 'a note''s words'; \
         create index holds_by_note on holds (note)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let after = tables::snapshot(&db).await;
    assert_ne!(before, after);
    let note = ["note", "text", "not", "null", "default", "''::text,"];
    assert!(
        after
            .lines()
            .any(|line| line.split_whitespace().eq(note.iter().copied())),
        "{after}"
    );
    assert!(after.contains("comment on column holds.note is 'a note''s words';"));
    assert!(after.contains("CREATE INDEX holds_by_note ON public.holds USING btree (note);"));
    // and what the file cannot show is refused
    sqlx::query("create table parted (id int) partition by range (id)")
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(tables::unshown(&db).await, ["partitioned table parted"]);
}

#[tokio::test]
async fn every_function_is_named_by_the_migration_that_wrote_it() {
    let db = TestDb::new().await;
    let current = snapshot(&db).await;
    let unnamed: Vec<&str> = current
        .lines()
        .filter(|line| line.ends_with("(not written by a migration)"))
        .collect();
    assert!(
        unnamed.is_empty(),
        "functions of unknown origin: {unnamed:?}"
    );
    // one implementation per engine rule: the single-request forms are
    // batches of one, not copies
    assert!(current.contains("from hf_hold_many(p_resource, array[p_qty]"));
    assert!(current.contains("perform hf_start_payment(array[v_purchase]"));
}

/// `hf_line_shape` (a one-line purchase read from its row, used by the
/// combined payment start) counts as `hf_purchase_shape` (read from the
/// table, used by the single one) for holds in every state, due or not.
#[tokio::test]
async fn a_lines_shape_read_from_its_row_is_its_purchases_shape() {
    let db = TestDb::new().await;
    sqlx::query("select hf_upsert_resource('shapes', 100)")
        .execute(&db.pool)
        .await
        .unwrap();
    // every state, and a held and a paying hold each side of now
    sqlx::query(
        "insert into holds (resource_id, account_id, qty, state, expires_at, payment_started_at,
                            payment_deadline, ended_at, ended_by, end_reason, payment_ref)
         select 'shapes', 'a' || g, 1, s.state,
                now() + (case when g % 2 = 0 then interval '1 hour' else interval '-1 hour' end),
                case when s.state in ('awaiting_payment', 'confirmed') then now() end,
                case when s.state in ('awaiting_payment', 'confirmed')
                     then now() + (case when g % 2 = 0 then interval '1 hour' else interval '-1 hour' end) end,
                case when s.state in ('confirmed', 'released', 'expired') then now() end,
                case when s.state in ('confirmed', 'released', 'expired') then 'test' end,
                case when s.state in ('released', 'expired') then 'test' end,
                null
           from generate_series(1, 4) g,
                (values ('held'), ('awaiting_payment'), ('released'), ('expired')) s(state)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let (holds, differ): (i64, i64) = sqlx::query_as(
        "select count(*), count(*) filter (where hf_line_shape(h, now()) is distinct from
                                                  hf_purchase_shape(h.purchase_id, now()))
           from holds h",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((holds, differ), (16, 0));
}

/// 0003 is the text every running database recorded: the emptied one,
/// whose checksum the release before issue 44 wrote over the original's at
/// every migrate (its comment still speaks of that patch: the text cannot
/// change, its checksum is what the databases hold). The patch is gone and
/// no migration is rewritten after databases applied it (issue 44): a
/// database the previous release migrated migrates again as it stands,
/// and none has the naive tables (0016 drops them where the original text
/// made them).
#[tokio::test]
async fn every_database_applied_0003_as_it_stands_and_none_has_naive_tables() {
    let db = TestDb::new().await;
    let naive: Option<String> = sqlx::query_scalar("select to_regclass('naive_resources')::text")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(naive, None);
    // the checksum the previous release recorded for it (SHA-384 of the
    // emptied text)
    let applied = "b6decf6f24ee744327c3219cf4645e1439d1d2bc4876646b\
                   6f9bbcb00a17d03ddd980f30cba63fdd1aa3876b68e0eba4";
    let current = holdfast::database::MIGRATOR
        .iter()
        .find(|m| m.version == 3)
        .unwrap()
        .checksum
        .to_vec();
    assert_eq!(hex::encode(current), applied);
    holdfast::database::migrate(&mut db.pool.acquire().await.unwrap())
        .await
        .expect("a migrated database migrates again");
}
