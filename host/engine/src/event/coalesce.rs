//! Coalescing: how a new event for an object merges into the events already waiting for
//! it, so a burst costs one call per watch while each watch still sees what it must.

use std::collections::VecDeque;

use kubewasm_core::event::EventType;

use super::Delivery;

/// Merge `new` into the pending events of one object, keeping what each watch must see:
/// its first event's type (and `old`), its latest state, and a deletion followed by a
/// re-creation. Delete/re-create churn keeps at most a deletion and an addition per watch.
pub(super) fn coalesce(events: &mut VecDeque<Delivery>, new: Delivery) {
    use EventType::*;
    let Some(pos) = events.iter().rposition(|d| d.watch_id == new.watch_id) else {
        events.push_back(new);
        return;
    };
    let last = &mut events[pos];
    match (last.event_type, new.event_type) {
        // The object was deleted and came back: the plugin must see both.
        (Deleted, Added | Modified | Resync) => events.insert(pos + 1, new),
        // Deleted again: the earlier deletion (of what the plugin last saw) stands.
        (Deleted, Deleted) => {}
        // Anything followed by a deletion: the deletion is what matters now; a deletion
        // already pending before it makes this one redundant.
        (_, Deleted) => {
            let earlier = events
                .iter()
                .take(pos)
                .rposition(|d| d.watch_id == new.watch_id);
            if earlier.is_some_and(|i| events[i].event_type == Deleted) {
                events.remove(pos);
            } else {
                events[pos] = new;
            }
        }
        // A resync or modification after a resync: take the newer event whole.
        (Resync, Modified | Added) => *last = new,
        // Otherwise keep the first event's type (and old object), take the newest state.
        (Added | Modified | Resync, _) => last.object = new.object,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::testing::{ev, rv};

    #[test]
    fn coalescing_keeps_latest_state_and_first_type() {
        use EventType::*;
        let mut q = VecDeque::new();
        coalesce(&mut q, ev(Added, "x", "1"));
        coalesce(&mut q, ev(Modified, "x", "2"));
        coalesce(&mut q, ev(Modified, "x", "3"));
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].event_type, rv(&q[0])), (Added, "3"));

        let mut q = VecDeque::new();
        coalesce(&mut q, ev(Modified, "x", "2"));
        coalesce(&mut q, ev(Modified, "x", "3"));
        assert_eq!((q[0].event_type, rv(&q[0])), (Modified, "3"));
        assert_eq!(q[0].old.as_ref().unwrap().resource_version(), Some("old"));

        coalesce(&mut q, ev(Deleted, "x", "4"));
        coalesce(&mut q, ev(Added, "x", "5"));
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].event_type, q[1].event_type), (Deleted, Added));

        let mut q = VecDeque::new();
        coalesce(&mut q, ev(Resync, "x", "1"));
        coalesce(&mut q, ev(Modified, "x", "2"));
        assert_eq!((q[0].event_type, rv(&q[0])), (Modified, "2"));
    }

    #[test]
    fn delete_recreate_churn_keeps_at_most_a_deletion_and_an_addition() {
        use EventType::*;
        let mut q = VecDeque::new();
        for (i, t) in [
            Deleted, Added, Deleted, Added, Deleted, Added, Deleted, Added,
        ]
        .into_iter()
        .enumerate()
        {
            coalesce(&mut q, ev(t, "x", &i.to_string()));
            assert!(
                q.len() <= 2,
                "{:?}",
                q.iter().map(|d| d.event_type).collect::<Vec<_>>()
            );
        }
        assert_eq!((q[0].event_type, q[1].event_type), (Deleted, Added));
        // The deletion kept is the first (of what the plugin last saw); the addition is the newest.
        assert_eq!((rv(&q[0]), rv(&q[1])), ("0", "7"));
    }

    #[test]
    fn watches_of_one_object_coalesce_separately() {
        use EventType::*;
        let mut q = VecDeque::new();
        let on = |w: &str, t, v: &str| Delivery {
            watch_id: w.into(),
            ..ev(t, "x", v)
        };
        coalesce(&mut q, on("a", Added, "1"));
        coalesce(&mut q, on("b", Added, "1"));
        coalesce(&mut q, on("a", Modified, "2"));
        coalesce(&mut q, on("b", Modified, "3"));
        let seen: Vec<(&str, EventType, &str)> = q
            .iter()
            .map(|d| (&*d.watch_id, d.event_type, rv(d)))
            .collect();
        assert_eq!(seen, [("a", Added, "2"), ("b", Added, "3")]);
    }
}
