//! The admin's menu: the groups a shop owner knows (Home, Orders,
//! Catalogue, Check-in, Settings) and, for owners, Operations, where the
//! hold engine's own pages live. Each group's heading opens its first page
//! and lists the others under it; a member sees only the pages their role
//! may open, so the menu is built here from one table ([`GROUPS`]) rather
//! than spelled out in the frame's template.

use crate::staff::roles::{Permission, Role};

/// A number a menu entry carries when something waits there.
#[derive(Clone, Copy)]
enum Count {
    None,
    /// Orders whose payment staff must look at.
    Flagged,
    /// Payments that arrived without an order.
    Orphans,
}

struct Entry {
    label: &'static str,
    href: &'static str,
    permission: Permission,
    count: Count,
    /// Shown only in a shop with a dining room (the host stand).
    with_rooms: bool,
}

const fn entry(label: &'static str, href: &'static str, permission: Permission) -> Entry {
    Entry {
        label,
        href,
        permission,
        count: Count::None,
        with_rooms: false,
    }
}

/// Every group of the menu, in order, with its pages: the first page is
/// the one the group's heading opens.
const GROUPS: &[(&str, &[Entry])] = &[
    ("Home", &[entry("Home", "/admin", Permission::Orders)]),
    (
        "Orders",
        &[
            entry("Orders", "/admin/orders", Permission::Orders),
            Entry {
                count: Count::Flagged,
                ..entry(
                    "Payments to look at",
                    "/admin/orders?flagged=1",
                    Permission::Orders,
                )
            },
            entry("Waiting list", "/admin/waitlist", Permission::Orders),
            entry("Exports", "/admin/exports", Permission::Exports),
        ],
    ),
    (
        "Catalogue",
        &[
            entry("What you sell", "/admin/catalogue", Permission::Catalogue),
            entry("Vouchers", "/admin/vouchers", Permission::Vouchers),
            entry(
                "Archived",
                "/admin/catalogue/archived",
                Permission::Catalogue,
            ),
        ],
    ),
    (
        "Check-in",
        &[
            entry("Check a code in", "/admin/redeem", Permission::Redeem),
            Entry {
                with_rooms: true,
                ..entry("Host stand", "/admin/dining", Permission::Redeem)
            },
            entry("Door lists", "/admin/door-list", Permission::DoorList),
        ],
    ),
    (
        "Settings",
        &[
            entry("Shop settings", "/admin/settings", Permission::Settings),
            entry("Staff", "/admin/staff", Permission::Staff),
            entry("Activity", "/admin/activity", Permission::Activity),
            entry("Webhooks", "/admin/webhooks", Permission::Integrations),
            entry("API keys", "/admin/api-keys", Permission::Integrations),
            entry(
                "Your two-factor sign-in",
                "/admin/two-factor",
                Permission::SignedIn,
            ),
        ],
    ),
    (
        "Operations",
        &[
            entry("Capacity and stock", "/admin/resources", Permission::Engine),
            entry("Reservations", "/admin/holds", Permission::Engine),
            Entry {
                count: Count::Orphans,
                ..entry(
                    "Payments without an order",
                    "/admin/payments/orphans",
                    Permission::Engine,
                )
            },
        ],
    ),
];

/// One group as the frame shows it.
pub(crate) struct MenuGroup {
    pub(crate) label: &'static str,
    /// The group's first page the member may open.
    pub(crate) href: &'static str,
    /// The group's other pages the member may open.
    pub(crate) items: Vec<MenuItem>,
}

/// One page under a group.
pub(crate) struct MenuItem {
    pub(crate) label: &'static str,
    pub(crate) href: &'static str,
    /// How many things wait there (0: none, nothing shown).
    pub(crate) count: i64,
}

/// The menu for a role, in a shop with a dining room or not (`rooms`).
/// While a session may only enrol a second factor, the menu holds that
/// page alone (every other link would lead back to it).
pub(crate) fn menu(
    role: Role,
    enrolling: bool,
    (flagged, orphans): (i64, i64),
    rooms: bool,
) -> Vec<MenuGroup> {
    GROUPS
        .iter()
        .filter_map(|(label, entries)| {
            let mut open = entries.iter().filter(|e| {
                if enrolling {
                    e.permission == Permission::SignedIn
                } else {
                    role.may(e.permission) && (rooms || !e.with_rooms)
                }
            });
            let first = open.next()?;
            Some(MenuGroup {
                label,
                href: first.href,
                items: open
                    .map(|e| MenuItem {
                        label: e.label,
                        href: e.href,
                        count: match e.count {
                            Count::None => 0,
                            Count::Flagged => flagged,
                            Count::Orphans => orphans,
                        },
                    })
                    .collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hrefs(role: Role, enrolling: bool) -> Vec<&'static str> {
        menu(role, enrolling, (0, 0), true)
            .into_iter()
            .flat_map(|g| std::iter::once(g.href).chain(g.items.into_iter().map(|i| i.href)))
            .collect()
    }

    #[test]
    fn each_role_sees_the_pages_it_may_open_and_an_enrolling_session_one() {
        let owner = hrefs(Role::Owner, false);
        assert_eq!(owner.len(), 20, "{owner:?}");
        assert_eq!(owner[0], "/admin");
        let door = hrefs(Role::Door, false);
        assert_eq!(
            door,
            ["/admin/redeem", "/admin/dining", "/admin/two-factor"]
        );
        // a shop without a dining room has no host stand
        let no_rooms: Vec<&str> = menu(Role::Door, false, (0, 0), false)
            .into_iter()
            .flat_map(|g| std::iter::once(g.href).chain(g.items.into_iter().map(|i| i.href)))
            .collect();
        assert_eq!(no_rooms, ["/admin/redeem", "/admin/two-factor"]);
        let boxed = hrefs(Role::BoxOffice, false);
        assert!(boxed.contains(&"/admin/vouchers") && !boxed.contains(&"/admin/resources"));
        assert!(!boxed.contains(&"/admin/catalogue/archived"));
        assert_eq!(hrefs(Role::Owner, true), ["/admin/two-factor"]);
    }

    #[test]
    fn every_menu_link_is_a_page_of_the_route_table() {
        for href in hrefs(Role::Owner, false) {
            let path = href.split('?').next().unwrap();
            assert!(
                super::super::route_for(&actix_web::http::Method::GET, path).is_some(),
                "{href}"
            );
        }
    }
}
