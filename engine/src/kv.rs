//! Host-side KV-cache slot management. A paged cache hands out 16-token blocks on demand
//! through a block table; a contiguous cache places tokens in one pool in arrival order, so
//! reading one sequence's history needs a gather.

pub const BLOCK: usize = 16;

#[derive(Debug, Clone)]
pub struct KvSlots {
    pub paged: bool,
    pub max_seqs: usize,
    pub max_ctx: usize,
    /// Blocks per sequence in the table (paged) or per sequence region (contiguous gather).
    pub max_blocks: usize,
    /// `[max_seqs, max_blocks]` physical block ids, -1 unassigned (paged).
    pub block_table: Vec<i32>,
    /// `[max_seqs, max_ctx]` pool slot of each position, -1 unassigned (contiguous).
    pub slot_map: Vec<i32>,
    pub seq_len: Vec<i32>,
    next: i32,
}

impl KvSlots {
    pub fn new(paged: bool, max_seqs: usize, max_ctx: usize) -> Self {
        let max_blocks = max_ctx.div_ceil(BLOCK).max(1);
        // Capacity in whole blocks, so a gathered sequence region and a table row agree.
        let max_ctx = max_blocks * BLOCK;
        Self {
            paged,
            max_seqs,
            max_ctx,
            max_blocks,
            block_table: vec![-1; max_seqs * max_blocks],
            slot_map: vec![-1; max_seqs * max_ctx],
            seq_len: vec![0; max_seqs],
            next: 0,
        }
    }

    /// Pool slots the cache must hold.
    pub fn capacity(&self) -> usize {
        self.max_seqs * self.max_blocks * BLOCK
    }

    pub fn reset(&mut self) {
        self.block_table.fill(-1);
        self.slot_map.fill(-1);
        self.seq_len.fill(0);
        self.next = 0;
    }

    /// The pool slot for token (`seq`, `pos`), assigning one on first use.
    pub fn slot(&mut self, seq: usize, pos: usize) -> Result<i32, String> {
        if seq >= self.max_seqs || pos >= self.max_ctx {
            return Err(format!(
                "KV cache holds {} sequences of {} tokens; asked for sequence {seq} position {pos}",
                self.max_seqs, self.max_ctx
            ));
        }
        self.seq_len[seq] = self.seq_len[seq].max(pos as i32 + 1);
        if self.paged {
            let e = &mut self.block_table[seq * self.max_blocks + pos / BLOCK];
            if *e < 0 {
                *e = self.next;
                self.next += 1;
            }
            Ok(*e * BLOCK as i32 + (pos % BLOCK) as i32)
        } else {
            let e = &mut self.slot_map[seq * self.max_ctx + pos];
            if *e < 0 {
                *e = self.next;
                self.next += 1;
            }
            Ok(*e)
        }
    }

    /// The block table attention reads from the gathered per-sequence buffer (contiguous
    /// mode): sequence s's positions are rows [s * max_blocks * BLOCK, ...).
    pub fn identity_table(&self) -> Vec<i32> {
        (0..self.max_seqs * self.max_blocks)
            .map(|i| i as i32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paged_blocks_interleave_as_sequences_grow() {
        let mut kv = KvSlots::new(true, 2, 40);
        assert_eq!(kv.slot(0, 0).unwrap(), 0);
        assert_eq!(kv.slot(1, 0).unwrap(), 16);
        assert_eq!(kv.slot(0, 15).unwrap(), 15);
        assert_eq!(kv.slot(0, 16).unwrap(), 32); // third block handed out
        assert_eq!(kv.seq_len, vec![17, 1]);
        assert!(kv.slot(2, 0).is_err());
        assert!(kv.slot(0, 48).is_err());
    }

    #[test]
    fn contiguous_slots_follow_arrival_order() {
        let mut kv = KvSlots::new(false, 2, 8);
        assert_eq!(kv.slot(0, 0).unwrap(), 0);
        assert_eq!(kv.slot(0, 1).unwrap(), 1);
        assert_eq!(kv.slot(1, 0).unwrap(), 2);
        assert_eq!(kv.slot(0, 2).unwrap(), 3);
        assert_eq!(kv.slot(0, 1).unwrap(), 1); // stable on reuse
        kv.reset();
        assert_eq!(kv.slot(1, 0).unwrap(), 0);
    }
}
