//! Greedy decode steps submitted ahead. A greedy sequence's next pass is known before its
//! argmax reaches the host: the same slot, one position on, that argmax as its id. So when the
//! caller says it will most likely ask for it (`Want::ArgmaxAhead`), the step's pass is
//! followed at once by the next one, whose ids are copied on the device from the argmaxes the
//! first leaves in `chosen`; the host then reads the first pass back while the GPU runs the
//! second, and the next call finds its pass submitted already (or run): the readback, the
//! host's sampling and stop checks and the recording of the next pass overlap the GPU's work
//! instead of leaving it idle between steps.
//!
//! The tokens stay exactly the plain loop's: a pass submitted ahead serves a call only when it
//! ran that call's rows (each row's slot, position and id; every row is computed as alone, so
//! a call for some of its rows, the others having stopped, takes those); any other call (a
//! prompt, a sampled step, a copy between slots, new slots) leaves it unused. Its only writes
//! are the keys and values of its rows, each at a position past what its slot holds: what the
//! plain loop writes there next, or (a sequence that stopped) a position no pass reads before
//! writing it again.

use super::forward::{Ids, Pick, Submitted};
use super::GpuBackend;
use crate::backend::rows::Seq;
use crate::config::MAX_VERIFY;
use crate::error::Result;

/// The pass submitted ahead, if any, and the two buffers its argmaxes are read from: one for
/// the pass being read while the next one is submitted.
pub(super) struct Ahead {
    staging: [wgpu::Buffer; 2],
    pending: Option<Pending>,
}

/// A pass submitted: each row's (slot, position, id), where its argmaxes are read from (one of
/// `Ahead::staging`, or the backend's own staging buffer) and its error scopes' verdict.
struct Pending {
    rows: Vec<(usize, usize, u32)>,
    staging: Option<usize>,
    sent: Submitted,
    verdict: Verdict,
}

/// What `ErrorScopes::close` gives, kept until the pass is read.
#[cfg(not(target_arch = "wasm32"))]
type Verdict = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>>;
#[cfg(target_arch = "wasm32")]
type Verdict = std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>>>>;

impl Ahead {
    pub fn new(ctx: &super::Context) -> Ahead {
        let bytes = (MAX_VERIFY * 4) as u64;
        Ahead {
            staging: [0, 1].map(|i| ctx.staging(&format!("argmax staging {i}"), bytes)),
            pending: None,
        }
    }
}

impl GpuBackend {
    /// Forgets the pass submitted ahead, if any: the call now made is not the one it ran.
    pub(super) fn drop_ahead(&mut self) {
        if self.ahead.pending.take().is_some() {
            self.totals.unused += 1;
        }
    }

    /// A greedy decode step (`Want::Argmax`; one id per sequence, at most `MAX_VERIFY`): each
    /// sequence's argmax into `chosen_host`, from the pass submitted ahead when it ran these
    /// rows, else from a pass submitted now. With `then_next` (`Want::ArgmaxAhead`) the pass
    /// after it is submitted before this one is read back.
    pub(super) async fn decode_argmax(&mut self, seqs: &[Seq<'_>], then_next: bool) -> Result<()> {
        self.ctx.check()?;
        let pending = self.ahead.pending.take();
        let covers = |p: &Pending| {
            seqs.iter()
                .all(|s| p.rows.contains(&(s.slot, s.pos, s.ids[0])))
        };
        let current = match pending {
            Some(p) if covers(&p) => p,
            unused => {
                self.totals.unused += unused.is_some() as usize;
                self.ids_host.clear();
                self.ids_host.extend(seqs.iter().map(|s| s.ids[0]));
                let rows = seqs.iter().map(|s| (s.slot, s.pos, s.ids[0])).collect();
                self.send(rows, Ids::Host, None)
            }
        };
        // Where each sequence's row is in the pass (which may have more rows: some stopped).
        let from: Vec<usize> = (seqs.iter())
            .map(|s| current.rows.iter().position(|r| r.0 == s.slot).unwrap_or(0))
            .collect();
        // The current pass's argmaxes are asked for before the next pass is submitted: in the
        // browser a map waits for every submission made before it is asked.
        let mut chosen = vec![0u32; current.rows.len()];
        let mapping = (self.ctx).begin_read(self.staging(current.staging), 4 * chosen.len());
        let room = seqs.iter().all(|s| s.pos + 1 < self.config.n_positions);
        // The next pass's argmaxes go to the other of the two buffers.
        let other = current.staging.map_or(0, |i| 1 - i);
        let next = (then_next && room).then(|| self.submit_next(seqs, &from, other));
        let upto = Some(current.sent.index.clone());
        let staging = self.staging(current.staging);
        let read = (self.ctx)
            .finish_read(staging, &mut chosen, mapping, upto)
            .await;
        if let Err(e) = current.verdict.await.and(read) {
            self.totals.unused += next.is_some() as usize;
            return Err(e);
        }
        self.chosen_host = from.iter().map(|&i| chosen[i]).collect();
        if let Some(mut next) = next {
            for (row, &id) in next.rows.iter_mut().zip(&self.chosen_host) {
                row.2 = id;
            }
            self.ahead.pending = Some(next);
        }
        self.read_rows = 0;
        self.last_pass = current.sent.counters;
        if current.staging.is_none() {
            self.totals += current.sent.counters; // a pass submitted ahead was counted when it was
        }
        Ok(())
    }

    /// The buffer a pass's argmaxes are read from: one of `Ahead::staging`, or the backend's own.
    fn staging(&self, ahead: Option<usize>) -> &wgpu::Buffer {
        match ahead {
            Some(i) => &self.ahead.staging[i],
            None => &self.staging,
        }
    }

    /// Submits a greedy decode pass over `rows` (slot, position, id), its ids from `ids_host`
    /// or copied on the device (`ids`), its argmaxes staged in `staging` (`Self::staging`).
    fn send(
        &mut self,
        rows: Vec<(usize, usize, u32)>,
        ids: Ids<'_>,
        staging: Option<usize>,
    ) -> Pending {
        let table = self.table(rows.iter().map(|&(s, p, _)| (s, p, 1)));
        let scopes = self.ctx.scopes();
        let buffer = self.staging(staging);
        let sent = self.submit(&table, ids, rows.len() > 1, Pick::Argmax, buffer);
        let verdict = Box::pin(scopes.close("running the model on the GPU"));
        Pending {
            rows,
            staging,
            sent,
            verdict,
        }
    }

    /// Submits the pass after the one just submitted or found (the current one) for `seqs`, all
    /// of its rows or some: each one position on, its id the current pass's argmax of its row
    /// `from[i]`, copied on the device (the host learns them when it reads the current pass);
    /// its argmaxes staged in `Ahead::staging[staging]`.
    fn submit_next(&mut self, seqs: &[Seq<'_>], from: &[usize], staging: usize) -> Pending {
        let rows = seqs.iter().map(|s| (s.slot, s.pos + 1, 0)).collect();
        let mut next = self.send(rows, Ids::Chosen(from), Some(staging));
        next.sent.counters.ahead = 1;
        self.totals += next.sent.counters;
        next
    }
}
