//! A long list of things to tick (a voucher's products, a door's tiers
//! and slots), grouped by event, day or shelf as the catalogue groups
//! them: each group folded under its name with how many it holds and how
//! many are ticked, open when something in it is, and a filter over all
//! of them (`static/admin.js`). Drawn by `fields.html`'s `picks` macro.

/// One thing to tick.
pub(crate) struct PickItem {
    pub id: String,
    pub label: String,
    pub chosen: bool,
}

/// Things to tick under one name.
pub(crate) struct PickGroup {
    pub label: String,
    pub items: Vec<PickItem>,
}

impl PickGroup {
    pub(crate) fn chosen(&self) -> usize {
        self.items.iter().filter(|i| i.chosen).count()
    }
}

/// `(group, id, label, chosen)` in the order given, gathered under their
/// groups in the order each group first comes.
pub(crate) fn grouped(
    items: impl IntoIterator<Item = (String, String, String, bool)>,
) -> Vec<PickGroup> {
    let mut groups: Vec<PickGroup> = Vec::new();
    for (group, id, label, chosen) in items {
        let item = PickItem { id, label, chosen };
        match groups.iter_mut().find(|g| g.label == group) {
            Some(g) => g.items.push(item),
            None => groups.push(PickGroup {
                label: group,
                items: vec![item],
            }),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn things_gather_under_their_groups_in_first_order() {
        let s = |x: &str| x.to_owned();
        let groups = grouped([
            (s("Gala"), s("a"), s("Stalls"), false),
            (s("Bread, Tue"), s("b"), s("08:00"), true),
            (s("Gala"), s("c"), s("Balcony"), false),
        ]);
        let labels: Vec<(&str, usize, usize)> = groups
            .iter()
            .map(|g| (g.label.as_str(), g.items.len(), g.chosen()))
            .collect();
        assert_eq!(labels, [("Gala", 2, 0), ("Bread, Tue", 1, 1)]);
    }
}
