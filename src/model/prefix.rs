//! Prefix caching: what each KV cache slot holds, so that a request whose prompt starts with ids
//! computed before (the same prompt again, a widget's fixed preamble, a chat's history, the `n`
//! choices of one prompt) runs only the rest of it.
//!
//! The keys and values at position i are a function of the ids 0..=i alone, so a slot holds
//! exactly the ids it was last given at each position: a forward of `ids` at `pos` leaves it
//! holding its first `pos` ids and then `ids` (rejected draft tokens included: their positions
//! hold what those ids give, and a later request that starts with them may use them). Every
//! forward and every slot operation goes through `Model`, which keeps this record beside the
//! backend; a fall-back to the CPU empties it.
//!
//! What is kept is what the slots hold anyway: a batch reuses the free slot whose ids match
//! longest, else the one used least recently, and `Batch::shrink` frees the slots at the end.
//! Reuse is offered only where the backend computes each row alike whatever the pass carries
//! (`Backend::rows_alike`: the 8-bit CPU kernels), so a reused prefix gives the same logits,
//! bit for bit, as the whole prompt run again.

/// The ids each KV cache slot holds keys and values for, and when each slot was last used.
#[derive(Default)]
pub(super) struct KvHeld {
    slots: Vec<Vec<u32>>,
    used: Vec<u64>,
    clock: u64,
}

impl KvHeld {
    /// A forward of `ids` at positions `pos..` in `slot`. Where the record is shorter than `pos`
    /// the positions between are not known, so the record keeps only what it knew.
    pub fn wrote(&mut self, slot: usize, pos: usize, ids: &[u32]) {
        self.ensure(slot);
        let held = &mut self.slots[slot];
        if held.len() >= pos {
            held.truncate(pos);
            held.extend_from_slice(ids);
        }
        self.touch(slot);
    }

    /// `n` slots (at least 1): the first `n` keep what they held, the others are gone.
    pub fn resize(&mut self, n: usize) {
        let n = n.max(1);
        self.slots.resize_with(n, Vec::new);
        self.used.resize(n, 0);
    }

    /// Only the first `len` positions of `slot` are kept (a backend that copies a slot when it
    /// switches to it copies only those).
    pub fn keep(&mut self, slot: usize, len: usize) {
        if let Some(held) = self.slots.get_mut(slot) {
            held.truncate(len);
        }
    }

    /// Positions `0..len` of `from` copied into `to`.
    pub fn copy(&mut self, from: usize, to: usize, len: usize) {
        self.ensure(from.max(to));
        let ids: Vec<u32> = self.slots[from].iter().take(len).copied().collect();
        self.slots[to] = ids;
        self.touch(to);
    }

    /// Every slot empty (a new backend).
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(Vec::clear);
    }

    /// How many of `ids`' first positions `slot` holds, leaving at least the last id to run (its
    /// logits are the step's answer).
    pub fn reusable(&self, slot: usize, ids: &[u32]) -> usize {
        let held = self.slots.get(slot).map_or(&[][..], Vec::as_slice);
        let common = held.iter().zip(ids).take_while(|(a, b)| a == b).count();
        common.min(ids.len().saturating_sub(1))
    }

    /// Of `slots`, the one holding the most of `ids` (`reusable`), and how many; the one used
    /// least recently among those holding none (ties: the first).
    pub fn best(&self, ids: &[u32], slots: impl Iterator<Item = usize>) -> Option<(usize, usize)> {
        slots
            .map(|s| (s, self.reusable(s, ids)))
            .min_by_key(|&(s, n)| (std::cmp::Reverse(n), self.used.get(s).copied().unwrap_or(0)))
    }

    fn ensure(&mut self, slot: usize) {
        if slot >= self.slots.len() {
            self.resize(slot + 1);
        }
    }

    fn touch(&mut self, slot: usize) {
        self.clock += 1;
        self.used[slot] = self.clock;
    }
}

#[cfg(test)]
mod tests {
    use super::KvHeld;

    #[test]
    fn a_slot_holds_what_it_was_last_given_at_each_position() {
        let mut h = KvHeld::default();
        h.wrote(0, 0, &[1, 2, 3, 4]);
        h.wrote(0, 2, &[9]); // a shorter sequence overwrote position 2
        assert_eq!(h.reusable(0, &[1, 2, 9, 5, 6]), 3);
        assert_eq!(h.reusable(0, &[1, 2, 3, 4]), 2);
        // The last id always runs: its logits are the answer.
        assert_eq!(h.reusable(0, &[1, 2, 9]), 2);
        h.copy(0, 2, 2);
        assert_eq!(h.reusable(2, &[1, 2, 7]), 2);
        h.keep(0, 1);
        assert_eq!(h.reusable(0, &[1, 2, 9, 5]), 1);
        // A forward past what the record knows: position 1 is unknown, so only position 0 counts.
        h.wrote(0, 2, &[7]);
        assert_eq!(h.reusable(0, &[1, 2, 7, 5]), 1);
        h.clear();
        assert_eq!(h.reusable(2, &[1, 2, 7]), 0);
    }

    #[test]
    fn the_best_slot_holds_the_longest_prefix_else_was_used_least_recently() {
        let mut h = KvHeld::default();
        h.resize(3);
        h.wrote(1, 0, &[5, 6]);
        h.wrote(0, 0, &[7, 8]);
        h.wrote(2, 0, &[1, 2, 3]);
        assert_eq!(h.best(&[1, 2, 3, 4], 0..3), Some((2, 3)));
        assert_eq!(h.best(&[9, 9], 0..3), Some((1, 0)));
        assert_eq!(h.best(&[9, 9], [0, 2].into_iter()), Some((0, 0)));
        assert_eq!(h.best(&[9], std::iter::empty()), None);
    }
}
