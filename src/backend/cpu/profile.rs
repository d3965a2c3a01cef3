//! Where CPU forwards spend their time: a `Profiler` that the forward pass asks for a lap after
//! each phase, and the sums it leaves, the prompt's (more than one token) and the decode steps'
//! (one token each) apart. The products themselves know nothing of it.

use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};

/// A part of the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The matrix products of the layers (8-bit for `q8`, f32 for `f32`).
    Matmul,
    /// Activations to 8 bits before each product (`q8` only).
    Quantize,
    Attention,
    Gelu,
    /// The LayerNorms, with the residual adds and the embedding lookup before them.
    LayerNorm,
    /// The tied output projection over the vocabulary, quantization included.
    LmHead,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Matmul,
        Phase::Quantize,
        Phase::Attention,
        Phase::Gelu,
        Phase::LayerNorm,
        Phase::LmHead,
    ];

    /// The phase's name in the JS API, the CLI and the page.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Matmul => "matmul",
            Phase::Quantize => "quantize",
            Phase::Attention => "attention",
            Phase::Gelu => "gelu",
            Phase::LayerNorm => "layer_norm",
            Phase::LmHead => "lm_head",
        }
    }
}

/// Sums over CPU forwards since profiling started; the phases are laps of one clock, so they add
/// up to `total_ms`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    pub calls: usize,
    pub tokens: usize,
    pub total_ms: f64,
    ms: [f64; Phase::ALL.len()],
    /// How many laps each phase had: the forward's structure (a q8 product is one `quantize` lap
    /// and one `matmul` lap; f32 has no `quantize` lap), which no coarse clock can hide.
    laps: [usize; Phase::ALL.len()],
}

impl Phases {
    /// Milliseconds spent in `phase`.
    pub fn ms(&self, phase: Phase) -> f64 {
        self.ms[phase as usize]
    }

    /// How many laps `phase` had.
    pub fn laps(&self, phase: Phase) -> usize {
        self.laps[phase as usize]
    }

    /// The phases by name, with their milliseconds.
    pub fn named(&self) -> [(&'static str, f64); Phase::ALL.len()] {
        Phase::ALL.map(|p| (p.name(), self.ms(p)))
    }

    fn add(&mut self, o: &Phases) {
        self.calls += o.calls;
        self.tokens += o.tokens;
        self.total_ms += o.total_ms;
        for (a, b) in self.ms.iter_mut().zip(o.ms) {
            *a += b;
        }
        for (a, b) in self.laps.iter_mut().zip(o.laps) {
            *a += b;
        }
    }
}

/// `{ calls, tokens, totalMs, phases: { matmul, quantize, … }, laps: { matmul, quantize, … } }`.
impl Serialize for Phases {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Named<'a>(&'a Phases, bool);
        impl Serialize for Named<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(Phase::ALL.len()))?;
                for p in Phase::ALL {
                    if self.1 {
                        m.serialize_entry(p.name(), &self.0.laps(p))?;
                    } else {
                        m.serialize_entry(p.name(), &self.0.ms(p))?;
                    }
                }
                m.end()
            }
        }
        let mut st = s.serialize_struct("Phases", 5)?;
        st.serialize_field("calls", &self.calls)?;
        st.serialize_field("tokens", &self.tokens)?;
        st.serialize_field("totalMs", &self.total_ms)?;
        st.serialize_field("phases", &Named(self, false))?;
        st.serialize_field("laps", &Named(self, true))?;
        st.end()
    }
}

/// The prompt's forward and the decode steps', apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Profile {
    pub prompt: Phases,
    pub decode: Phases,
}

impl Profile {
    /// Adds one forward of `tokens` tokens (`call`: a forward of its own, not more rows of the
    /// head of the last one).
    pub(super) fn record(&mut self, tokens: usize, p: Phases, call: bool) {
        // The first pass since profiling began is the prompt's (with the head's rows it adds,
        // `call` false), whatever its rows; every later one a step's, a verification pass's or a
        // beam step's rows as much as one token's.
        let first = self.prompt.calls == 0 || (!call && self.decode.calls == 0);
        let into = if first {
            &mut self.prompt
        } else {
            &mut self.decode
        };
        into.add(&Phases {
            calls: call as usize,
            tokens: if call { tokens } else { 0 },
            ..p
        });
    }
}

/// The laps of one forward; when off, it reads no clock.
pub(super) struct Profiler {
    on: bool,
    start: f64,
    last: f64,
    phases: Phases,
}

impl Profiler {
    pub fn new(on: bool) -> Profiler {
        let now = if on { crate::platform::now_ms() } else { 0.0 };
        Profiler {
            on,
            start: now,
            last: now,
            phases: Phases::default(),
        }
    }

    /// Counts the time since the last lap as `phase`.
    #[inline]
    pub fn lap(&mut self, phase: Phase) {
        if self.on {
            let now = crate::platform::now_ms();
            self.phases.ms[phase as usize] += now - self.last;
            self.phases.laps[phase as usize] += 1;
            self.last = now;
        }
    }

    /// The forward's phases, `None` when off.
    pub fn finish(self) -> Option<Phases> {
        self.on.then_some(Phases {
            total_ms: self.last - self.start,
            ..self.phases
        })
    }
}
