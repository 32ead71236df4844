-- The shop is the owner's (issue 33): what it is called and how it looks,
-- set by an owner on the admin's Settings page and shown on every
-- shopper's page (src/storefront.rs). One row.
create table storefront (
    only_row       boolean not null default true primary key,
    name           text not null default 'Shop',
    description    text not null default '',
    -- buttons and links: white text on it must be readable (the page that
    -- saves it checks the contrast; the database keeps the shape)
    accent         text not null default '#0b6e4f',
    contact_email  text not null default '',
    terms_url      text not null default '',
    privacy_url    text not null default '',
    imprint_url    text not null default '',
    updated_at     timestamptz not null default now(),
    constraint storefront_one_row check (only_row),
    constraint storefront_name_shape check (length(name) between 1 and 100),
    constraint storefront_words_shape check (length(description) <= 300
                                             and length(contact_email) <= 254),
    constraint storefront_accent_shape check (accent ~ '^#[0-9a-f]{6}$'),
    constraint storefront_links_shape check (
        (terms_url = '' or (terms_url ~ '^https?://[^[:space:]]+$' and length(terms_url) <= 500))
        and (privacy_url = '' or (privacy_url ~ '^https?://[^[:space:]]+$' and length(privacy_url) <= 500))
        and (imprint_url = '' or (imprint_url ~ '^https?://[^[:space:]]+$' and length(imprint_url) <= 500)))
);
insert into storefront default values;
