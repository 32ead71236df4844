//! Who may do what in the admin. Every admin route names the permission it
//! needs (`crate::routes::admin`'s route table); a staff member's role
//! grants some permissions and not others, decided here by one exhaustive
//! `match`. A route without a permission cannot be registered, and a
//! request for one the role lacks is answered 403 and recorded.

use serde::Serialize;

/// A staff member's role; stored in `staff.role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Role {
    /// Everything, staff accounts and settings included.
    Owner,
    /// Orders, refunds, vouchers and exports; no staff accounts, no
    /// settings, no changes to what is sold or to the engine.
    BoxOffice,
    /// Redeeming codes, looking an order up, and the door's list of a
    /// slot or an event; nothing else.
    Door,
}

/// What an admin route or action needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Signing out, and the admin's own assets: every signed-in member.
    SignedIn,
    /// Redeeming a code at a door or counter.
    Redeem,
    /// Finding one order by its id or a code, to let someone in.
    LookUp,
    /// The orders, their payments and refund jobs.
    Orders,
    /// Refunding an order, retrying a refund.
    Refunds,
    /// Creating and changing vouchers.
    Vouchers,
    /// The door's printable list of a slot or an event: every holder's
    /// name and code, to tick off where no scanner works. The box office
    /// prints it for the door (the door role redeems and looks up, nothing
    /// else); recorded in Activity like an export.
    DoorList,
    /// Orders and attendees as CSV.
    Exports,
    /// What is sold: events, tiers, schedules, stock items, prices, sale
    /// windows, archiving.
    Catalogue,
    /// The hold engine: resources, capacity, holds, releases, repairs,
    /// payments without an order.
    Engine,
    /// What staff did (Activity).
    Activity,
    /// Staff accounts and their roles.
    Staff,
    /// The shop's settings (two-factor sign-in required, say).
    Settings,
    /// The shop's other systems: outgoing webhook endpoints and API keys.
    Integrations,
}

impl Permission {
    /// Every permission, as the route table and the tests name them.
    pub const ALL: [Permission; 14] = [
        Permission::SignedIn,
        Permission::Redeem,
        Permission::LookUp,
        Permission::DoorList,
        Permission::Orders,
        Permission::Refunds,
        Permission::Vouchers,
        Permission::Exports,
        Permission::Catalogue,
        Permission::Engine,
        Permission::Activity,
        Permission::Staff,
        Permission::Settings,
        Permission::Integrations,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::SignedIn => "signed_in",
            Permission::Redeem => "redeem",
            Permission::LookUp => "look_up",
            Permission::DoorList => "door_list",
            Permission::Orders => "orders",
            Permission::Refunds => "refunds",
            Permission::Vouchers => "vouchers",
            Permission::Exports => "exports",
            Permission::Catalogue => "catalogue",
            Permission::Engine => "engine",
            Permission::Activity => "activity",
            Permission::Staff => "staff",
            Permission::Settings => "settings",
            Permission::Integrations => "integrations",
        }
    }
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Owner, Role::BoxOffice, Role::Door];

    /// As `staff.role` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::BoxOffice => "box_office",
            Role::Door => "door",
        }
    }

    /// As staff and the command line write it (`box-office` or
    /// `box_office`).
    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase().replace('-', "_");
        Self::ALL.into_iter().find(|role| role.as_str() == name)
    }

    /// How the admin names it.
    pub fn label(self) -> &'static str {
        match self {
            Role::Owner => "Owner",
            Role::BoxOffice => "Box office",
            Role::Door => "Door",
        }
    }

    /// Whether this role may do what `permission` covers.
    pub fn may(self, permission: Permission) -> bool {
        use Permission::*;
        match self {
            Role::Owner => true,
            Role::BoxOffice => match permission {
                SignedIn | Redeem | LookUp | DoorList | Orders | Refunds | Vouchers | Exports => {
                    true
                }
                Catalogue | Engine | Activity | Staff | Settings | Integrations => false,
            },
            // redeeming and looking an order up, nothing else: the box
            // office prints the door's list for the door
            Role::Door => match permission {
                SignedIn | Redeem | LookUp => true,
                DoorList | Orders | Refunds | Vouchers | Exports | Catalogue | Engine
                | Activity | Staff | Settings | Integrations => false,
            },
        }
    }

    /// Whether this role may admit a code its door does not check
    /// (another event's, another day's): the box office and owners may,
    /// and the redemption says so.
    pub fn overrides_door(self) -> bool {
        self.may(Permission::Orders)
    }

    /// Whether this role can give money back (two-factor sign-in may be
    /// required of everyone who can).
    pub fn refunds(self) -> bool {
        self.may(Permission::Refunds)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_read_as_written_and_the_door_may_only_redeem_and_look_up() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("Box-Office"), Some(Role::BoxOffice));
        assert_eq!(Role::parse("admin"), None);
        let door: Vec<_> = Permission::ALL
            .into_iter()
            .filter(|p| Role::Door.may(*p))
            .collect();
        assert_eq!(
            door,
            [Permission::SignedIn, Permission::Redeem, Permission::LookUp]
        );
        assert!(Permission::ALL.into_iter().all(|p| Role::Owner.may(p)));
        assert!(Role::BoxOffice.refunds() && !Role::Door.refunds());
        assert!(!Role::BoxOffice.may(Permission::Staff));
        assert!(!Role::BoxOffice.may(Permission::Settings));
        assert!(Role::BoxOffice.may(Permission::Exports) && !Role::Door.may(Permission::Exports));
        assert!(Role::BoxOffice.may(Permission::DoorList) && !Role::Door.may(Permission::DoorList));
    }
}
