//! The current schema in one file a newcomer can read:
//! `migrations/current/schema.sql`, one block per table (its columns with
//! their types and defaults, its constraints, indexes and triggers, and
//! the comments on them), then sequences of their own, views and types.
//! Read from PostgreSQL's catalogues (`pg_get_constraintdef`,
//! `pg_get_indexdef`, `pg_get_triggerdef`, `format_type`), not from
//! `pg_dump`, whose text changes between versions and which needs its
//! binary. The composite types the functions return are with the functions,
//! in `functions.sql`; sqlx's record of the migrations applied is left out.
//!
//! What the file cannot show (a partitioned table, a row-level security
//! policy, a rule, another schema) is refused by [`unshown`] rather than
//! left out quietly. Extensions head the file (`create extension`); what
//! they bring (functions, operators, types) is theirs and not listed.

use holdfast_testkit::TestDb;
use sqlx::FromRow;
use sqlx::postgres::PgRow;

use super::migrations_saying;

/// A table: its name, whether it is unlogged, its comment.
#[derive(FromRow)]
struct Table {
    name: String,
    unlogged: bool,
    comment: Option<String>,
}

/// A column, in the table's order.
#[derive(FromRow)]
struct Column {
    table_name: String,
    name: String,
    type_name: String,
    not_null: bool,
    default_value: Option<String>,
    /// `a` always, `d` by default, empty: not an identity column.
    identity: String,
    /// `s`: a stored generated column (its expression is `default_value`).
    generated: String,
    comment: Option<String>,
}

/// A constraint, an index of its own, or a trigger: one line of SQL under
/// its table, with its comment.
#[derive(FromRow)]
struct Part {
    table_name: String,
    name: String,
    definition: String,
    comment: Option<String>,
}

/// A sequence not made for an identity column.
#[derive(FromRow)]
struct Sequence {
    name: String,
    definition: String,
    comment: Option<String>,
}

/// A view, an enum or a domain: its whole statement.
#[derive(FromRow)]
struct Whole {
    kind: String,
    name: String,
    definition: String,
    comment: Option<String>,
}

const TABLES: &str = "
select c.relname::text as name, c.relpersistence = 'u' as unlogged,
       obj_description(c.oid, 'pg_class') as comment
  from pg_class c
 where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
   and c.relname <> '_sqlx_migrations'
 order by c.relname";

const COLUMNS: &str = "
select c.relname::text as table_name, quote_ident(a.attname) as name,
       format_type(a.atttypid, a.atttypmod)
         || case when a.attcollation <> t.typcollation
                 then ' collate ' || quote_ident(l.collname) else '' end as type_name,
       a.attnotnull as not_null, pg_get_expr(d.adbin, d.adrelid) as default_value,
       a.attidentity::text as identity, a.attgenerated::text as generated,
       col_description(c.oid, a.attnum) as comment
  from pg_attribute a
  join pg_class c on c.oid = a.attrelid
  join pg_type t on t.oid = a.atttypid
  left join pg_collation l on l.oid = a.attcollation
  left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
 where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
   and a.attnum > 0 and not a.attisdropped
 order by c.relname, a.attnum";

/// Keys first, then unique, exclusion, check and foreign-key constraints.
const CONSTRAINTS: &str = "
select c.relname::text as table_name, quote_ident(k.conname) as name,
       pg_get_constraintdef(k.oid) as definition,
       obj_description(k.oid, 'pg_constraint') as comment
  from pg_constraint k
  join pg_class c on c.oid = k.conrelid
 where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
 order by c.relname, array_position(array['p', 'u', 'x', 'c', 'f', 't'], k.contype::text),
          k.conname";

/// Indexes that no key, unique or exclusion constraint made.
const INDEXES: &str = "
select c.relname::text as table_name, i.relname::text as name,
       pg_get_indexdef(i.oid) as definition, obj_description(i.oid, 'pg_class') as comment
  from pg_index x
  join pg_class i on i.oid = x.indexrelid
  join pg_class c on c.oid = x.indrelid
 where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'
   and not exists (select 1 from pg_constraint k
                    where k.conindid = x.indexrelid and k.conrelid = x.indrelid
                      and k.contype in ('p', 'u', 'x'))
 order by c.relname, i.relname";

/// Triggers the migrations wrote (not those PostgreSQL keeps for foreign
/// keys), with a line that says so when one is not on.
const TRIGGERS: &str = "
select c.relname::text as table_name, t.tgname::text as name,
       pg_get_triggerdef(t.oid)
         || case t.tgenabled when 'O' then ''
                 else format(E';\\nalter table %I %s trigger %I', c.relname,
                             case t.tgenabled when 'D' then 'disable'
                                              when 'A' then 'enable always'
                                              else 'enable replica' end,
                             t.tgname) end as definition,
       obj_description(t.oid, 'pg_trigger') as comment
  from pg_trigger t
  join pg_class c on c.oid = t.tgrelid
 where c.relnamespace = 'public'::regnamespace and not t.tgisinternal
 order by c.relname, t.tgname";

/// Sequences of their own (an identity column's is the column's), with
/// what differs from a bigint sequence's defaults.
const SEQUENCES: &str = "
select c.relname::text as name,
       format('create sequence %I as %s', c.relname, format_type(s.seqtypid, null))
         || case when s.seqstart <> 1 then ' start ' || s.seqstart else '' end
         || case when s.seqincrement <> 1 then ' increment ' || s.seqincrement else '' end
         || case when s.seqmin <> 1 then ' minvalue ' || s.seqmin else '' end
         || case when s.seqmax <> 9223372036854775807 then ' maxvalue ' || s.seqmax else '' end
         || case when s.seqcache <> 1 then ' cache ' || s.seqcache else '' end
         || case when s.seqcycle then ' cycle' else '' end
         || coalesce((select format(' owned by %I.%I', o.relname, a.attname)
                        from pg_depend d
                        join pg_class o on o.oid = d.refobjid
                        join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
                       where d.objid = c.oid and d.classid = 'pg_class'::regclass
                         and d.refclassid = 'pg_class'::regclass and d.deptype = 'a'), '')
         as definition,
       obj_description(c.oid, 'pg_class') as comment
  from pg_sequence s
  join pg_class c on c.oid = s.seqrelid
 where c.relnamespace = 'public'::regnamespace
   and not exists (select 1 from pg_depend d
                    where d.objid = c.oid and d.classid = 'pg_class'::regclass
                      and d.deptype = 'i')
 order by c.relname";

/// Views and materialized views, then enums and domains.
const WHOLES: &str = "
select kind, name, definition, comment from (
    select case c.relkind when 'v' then 'view' else 'materialized view' end as kind,
           c.relname::text as name,
           format(E'create %s %I as\\n%s', case c.relkind when 'v' then 'view'
                                                         else 'materialized view' end,
                  c.relname, rtrim(pg_get_viewdef(c.oid, true), E';\\n ')) as definition,
           obj_description(c.oid, 'pg_class') as comment, 1 as rank
      from pg_class c
     where c.relnamespace = 'public'::regnamespace and c.relkind in ('v', 'm')
    union all
    select 'enum', t.typname::text,
           format(E'create type %I as enum (\\n%s\\n)', t.typname,
                  (select string_agg('    ' || quote_literal(e.enumlabel), E',\\n'
                                     order by e.enumsortorder)
                     from pg_enum e where e.enumtypid = t.oid)),
           obj_description(t.oid, 'pg_type'), 2
      from pg_type t
     where t.typnamespace = 'public'::regnamespace and t.typtype = 'e'
    union all
    select 'domain', t.typname::text,
           format('create domain %I as %s', t.typname, format_type(t.typbasetype, t.typtypmod))
             || case when t.typnotnull then ' not null' else '' end
             || coalesce(' default ' || t.typdefault, '')
             || coalesce((select string_agg(format(E'\\n    constraint %I %s', k.conname,
                                                   pg_get_constraintdef(k.oid)),
                                            '' order by k.conname)
                            from pg_constraint k where k.contypid = t.oid), ''),
           obj_description(t.oid, 'pg_type'), 3
      from pg_type t
     where t.typnamespace = 'public'::regnamespace and t.typtype = 'd'
) whole
 order by rank, name";

/// What this file cannot show, one line each: a database that has any of
/// these fails the test until the generator learns to show it.
const UNSHOWN: &str = "
select format('%s %s', case c.relkind when 'p' then 'partitioned table'
                                      when 'f' then 'foreign table'
                                      else 'relation of kind ' || c.relkind::text end, c.relname)
  from pg_class c
 where c.relnamespace = 'public'::regnamespace and c.relkind not in ('r', 'i', 'S', 'v', 'm', 'c')
union all
select format('row-level security on %s', c.relname)
  from pg_class c
 where c.relnamespace = 'public'::regnamespace and c.relrowsecurity
union all
select format('policy %s on %s', p.polname, p.polrelid::regclass) from pg_policy p
union all
select format('rule %s on %s', r.rulename, r.ev_class::regclass)
  from pg_rewrite r join pg_class c on c.oid = r.ev_class
 where c.relnamespace = 'public'::regnamespace and r.rulename <> '_RETURN'
union all
select format('%s inherits from %s', i.inhrelid::regclass, i.inhparent::regclass)
  from pg_inherits i join pg_class c on c.oid = i.inhrelid
 where c.relnamespace = 'public'::regnamespace and c.relkind <> 'i'
union all
select format('type %s of kind %s', t.typname, t.typtype::text)
  from pg_type t
 where t.typnamespace = 'public'::regnamespace and t.typtype not in ('b', 'c', 'e', 'd')
union all
select format('extension %s in schema %s', e.extname, e.extnamespace::regnamespace)
  from pg_extension e
 where e.extname <> 'plpgsql' and e.extnamespace <> 'public'::regnamespace
union all
select format('schema %s', n.nspname)
  from pg_namespace n
 where n.nspname not in ('public', 'information_schema') and n.nspname not like 'pg\\_%'
 order by 1";

/// Whatever the migrated database holds that the file cannot show.
pub(super) async fn unshown(db: &TestDb) -> Vec<String> {
    sqlx::query_scalar(UNSHOWN)
        .fetch_all(&db.pool)
        .await
        .expect("what the schema file cannot show")
}

/// The extensions the migrations created (their functions, types and
/// operators are theirs, not ours: neither file lists them).
const EXTENSIONS: &str = "
select e.extname::text from pg_extension e
 where e.extname <> 'plpgsql' and e.extnamespace = 'public'::regnamespace
 order by 1";

/// Every row of one catalogue query.
async fn all<T>(db: &TestDb, sql: &str) -> Vec<T>
where
    T: for<'r> FromRow<'r, PgRow> + Send + Unpin,
{
    sqlx::query_as(sql)
        .fetch_all(&db.pool)
        .await
        .unwrap_or_else(|error| panic!("{error}: {sql}"))
}

/// The schema file of a migrated database.
pub(super) async fn snapshot(db: &TestDb) -> String {
    let tables: Vec<Table> = all(db, TABLES).await;
    let columns: Vec<Column> = all(db, COLUMNS).await;
    let constraints: Vec<Part> = all(db, CONSTRAINTS).await;
    let indexes: Vec<Part> = all(db, INDEXES).await;
    let triggers: Vec<Part> = all(db, TRIGGERS).await;
    let sequences: Vec<Sequence> = all(db, SEQUENCES).await;
    let wholes: Vec<Whole> = all(db, WHOLES).await;
    let extensions: Vec<String> = sqlx::query_scalar(EXTENSIONS)
        .fetch_all(&db.pool)
        .await
        .expect("extensions");

    let mut out = String::from(
        "-- GENERATED from the migrated database by tests/api/schema/tables.rs: do not edit.\n\
         -- What each table holds now, whichever migrations wrote it: its columns, their\n\
         -- types and defaults, its constraints, indexes and triggers; then sequences of\n\
         -- their own, views and types (not sqlx's _sqlx_migrations). The functions,\n\
         -- and the composite types they return, are in functions.sql. Regenerate\n\
         -- both after a migration:\n\
         --   HOLDFAST_WRITE_SCHEMA=1 cargo test --test api schema::\n",
    );
    for extension in &extensions {
        out.push_str(&format!(
            "\n-- extension {extension} ({})\ncreate extension {extension};\n",
            written_by("extension", extension)
        ));
    }
    for table in &tables {
        let columns: Vec<&Column> = columns
            .iter()
            .filter(|c| c.table_name == table.name)
            .collect();
        out.push_str(&table_block(
            table,
            &columns,
            &of(&constraints, table),
            &of(&indexes, table),
            &of(&triggers, table),
        ));
    }
    for sequence in &sequences {
        out.push_str(&format!(
            "\n-- sequence {} ({})\n{};\n",
            sequence.name,
            written_by("sequence", &sequence.name),
            sequence.definition
        ));
        push_comment(&mut out, "sequence", &sequence.name, &sequence.comment);
    }
    for whole in &wholes {
        let kind = if whole.kind == "enum" {
            "type"
        } else {
            whole.kind.as_str()
        };
        out.push_str(&format!(
            "\n-- {} {} ({})\n{};\n",
            whole.kind,
            whole.name,
            written_by(kind, &whole.name),
            whole.definition
        ));
        push_comment(&mut out, kind, &whole.name, &whole.comment);
    }
    out
}

/// The parts under one table.
fn of<'a>(parts: &'a [Part], table: &Table) -> Vec<&'a Part> {
    parts
        .iter()
        .filter(|p| p.table_name == table.name)
        .collect()
}

/// One table's block: a heading naming the migrations that made and
/// changed it, `create table` with its columns and constraints, then its
/// own indexes, triggers and comments.
fn table_block(
    table: &Table,
    columns: &[&Column],
    constraints: &[&Part],
    indexes: &[&Part],
    triggers: &[&Part],
) -> String {
    let mut out = heading(&format!(
        "table {} ({})",
        table.name,
        written_by("table", &table.name)
    ));
    let unlogged = if table.unlogged { "unlogged " } else { "" };
    out.push_str(&format!("create {unlogged}table {} (\n", table.name));
    let width = columns.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut lines: Vec<String> = columns
        .iter()
        .map(|c| format!("    {:width$} {}", c.name, column_text(c)))
        .collect();
    lines.extend(
        constraints
            .iter()
            .map(|k| format!("    constraint {} {}", k.name, k.definition)),
    );
    out.push_str(&lines.join(",\n"));
    out.push_str("\n);\n");
    for part in indexes.iter().chain(triggers) {
        out.push_str(&format!("{};\n", part.definition));
    }
    push_comment(&mut out, "table", &table.name, &table.comment);
    for column in columns {
        let name = format!("{}.{}", table.name, column.name);
        push_comment(&mut out, "column", &name, &column.comment);
    }
    for constraint in constraints {
        let name = format!("{} on {}", constraint.name, table.name);
        push_comment(&mut out, "constraint", &name, &constraint.comment);
    }
    for index in indexes {
        push_comment(&mut out, "index", &index.name, &index.comment);
    }
    for trigger in triggers {
        let name = format!("{} on {}", trigger.name, table.name);
        push_comment(&mut out, "trigger", &name, &trigger.comment);
    }
    out
}

/// `-- words`, after a blank line, wrapped before 100 characters.
fn heading(words: &str) -> String {
    let mut out = String::from("\n--");
    let mut line = 2;
    for word in words.split(' ') {
        if line + 1 + word.len() > 100 {
            out.push_str("\n--  ");
            line = 4;
        }
        out.push(' ');
        out.push_str(word);
        line += 1 + word.len();
    }
    out.push('\n');
    out
}

/// `bigint not null generated always as identity`, `text not null default 'x'::text`.
fn column_text(column: &Column) -> String {
    let mut text = column.type_name.clone();
    if column.not_null {
        text.push_str(" not null");
    }
    match (column.identity.as_str(), column.generated.as_str()) {
        ("a", _) => text.push_str(" generated always as identity"),
        ("d", _) => text.push_str(" generated by default as identity"),
        (_, "s") => {
            let expression = column.default_value.as_deref().unwrap_or_default();
            text.push_str(&format!(" generated always as ({expression}) stored"));
        }
        _ => {
            if let Some(default) = &column.default_value {
                text.push_str(&format!(" default {default}"));
            }
        }
    }
    text
}

fn push_comment(out: &mut String, kind: &str, name: &str, comment: &Option<String>) {
    if let Some(comment) = comment {
        out.push_str(&format!(
            "comment on {kind} {name} is '{}';\n",
            comment.replace('\'', "''")
        ));
    }
}

/// "made by 0004_shop.sql; changed by 0010_what_was_paid.sql, …": the
/// migration that creates `kind name` (or, for one renamed, that created
/// it under its first name), and those that alter it after.
fn written_by(kind: &str, name: &str) -> String {
    let Some(history) = history(kind, name) else {
        return "not made by a migration".to_owned();
    };
    let mut words = format!("made by {}", history.made);
    if let Some(first) = &history.first_name {
        words.push_str(&format!(
            " as {first}; renamed by {}",
            history.renamed.join(", ")
        ));
    }
    if !history.changed.is_empty() {
        words.push_str(&format!("; changed by {}", history.changed.join(", ")));
    }
    words
}

/// Which migrations made, renamed and changed a relation.
struct History {
    made: String,
    /// The name it was made under, when it was renamed since.
    first_name: Option<String>,
    renamed: Vec<String>,
    changed: Vec<String>,
}

fn history(kind: &str, name: &str) -> Option<History> {
    let created = migrations_saying(&[
        format!("create {kind} {name}"),
        format!("create {kind} if not exists {name}"),
        format!("create unlogged {kind} {name}"),
        format!("create or replace {kind} {name}"),
    ]);
    let altered = migrations_saying(&[
        format!("alter {kind} {name}"),
        format!("alter {kind} if exists {name}"),
        format!("alter {kind} only {name}"),
    ]);
    let since = |from: &str| -> Vec<String> {
        altered
            .iter()
            .filter(|file| file.as_str() >= from)
            .cloned()
            .collect()
    };
    // a table dropped and made again counts from its last making; one
    // renamed to this name, from its making under the name before
    let renamed = renamed_to(kind, name);
    let made_here = created
        .last()
        .filter(|made| renamed.as_ref().is_none_or(|(file, _)| *made > file));
    if let Some(made) = made_here {
        return Some(History {
            made: made.clone(),
            first_name: None,
            renamed: Vec::new(),
            changed: since(made)
                .into_iter()
                .filter(|file| file != made)
                .collect(),
        });
    }
    let (file, before) = renamed?;
    let mut earlier = history(kind, &before)?;
    earlier.first_name.get_or_insert(before);
    earlier.renamed.push(file.clone());
    for changed in since(&file) {
        if !earlier.changed.contains(&changed) {
            earlier.changed.push(changed);
        }
    }
    Some(earlier)
}

/// The last migration that renames a relation to `name`, and the name it
/// had: `alter table pickup_schedules rename to schedules`.
fn renamed_to(kind: &str, name: &str) -> Option<(String, String)> {
    let mut found = None;
    let mut files: Vec<_> = std::fs::read_dir("migrations")
        .expect("migrations folder")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for path in files {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .to_lowercase();
        let pattern = format!("rename to {name}");
        for (at, _) in text.match_indices(&pattern) {
            if text[at + pattern.len()..].starts_with(word) {
                continue;
            }
            // the statement's start, then `alter <kind> [if exists] [only] <old>`
            let statement = &text[text[..at].rfind(';').map_or(0, |i| i + 1)..at];
            let Some(after) = statement
                .rfind(&format!("alter {kind} "))
                .map(|i| &statement[i + kind.len() + 7..])
            else {
                continue;
            };
            let after = after.trim_start();
            let after = after
                .strip_prefix("if exists ")
                .unwrap_or(after)
                .trim_start();
            let after = after.strip_prefix("only ").unwrap_or(after).trim_start();
            let before: String = after.chars().take_while(|c| word(*c)).collect();
            if !before.is_empty() {
                let file = path.file_name().unwrap().to_string_lossy().into_owned();
                found = Some((file, before));
            }
        }
    }
    found
}
