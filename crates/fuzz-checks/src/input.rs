//! A tiny reader that turns fuzz bytes into numbers, biased towards small and edge values
//! (the interesting ones for grids, ranks and sequences). Reading past the end yields zeros,
//! so every input maps to some case.

/// Edge values mixed into [`Input::u64`] and [`Input::u32`].
const EDGES: [u64; 8] = [
    0,
    1,
    u64::MAX,
    u64::MAX - 1,
    u32::MAX as u64,
    65_536,
    65_537,
    1 << 63,
];

/// Fuzz bytes consumed front to back.
pub(crate) struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Next byte, 0 once the input is exhausted.
    pub(crate) fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub(crate) fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub(crate) fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }

    /// Everything not consumed yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }

    /// A little-endian `u64` from the next 8 bytes (zero-padded).
    pub(crate) fn u64_le(&mut self) -> u64 {
        let mut a = [0u8; 8];
        let src = self.bytes(8);
        a[..src.len()].copy_from_slice(src);
        u64::from_le_bytes(a)
    }

    /// A little-endian `u32` from the next 4 bytes (zero-padded).
    pub(crate) fn u32_le(&mut self) -> u32 {
        let mut a = [0u8; 4];
        let src = self.bytes(4);
        a[..src.len()].copy_from_slice(src);
        u32::from_le_bytes(a)
    }

    /// A biased `u64`: one tag byte, then 0, 2 or 8 more bytes.
    /// Tags 0..=159 give `tag % 20`, 160..=207 a 16-bit value, 208..=247 any value,
    /// 248..=255 an edge value.
    pub(crate) fn u64(&mut self) -> u64 {
        match self.byte() {
            t @ 0..=159 => u64::from(t % 20),
            160..=207 => {
                let b = self.bytes(2);
                b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x))
            }
            208..=247 => self.u64_le(),
            t => EDGES[usize::from(t - 248)],
        }
    }

    /// A biased `u32` (see [`Input::u64`]; edge values are truncated).
    pub(crate) fn u32(&mut self) -> u32 {
        let v = self.u64();
        u32::try_from(v).unwrap_or(v as u32 | 0x8000_0000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhausted_input_reads_zero() {
        let mut i = Input::new(&[]);
        assert_eq!((i.byte(), i.u64(), i.u32_le()), (0, 0, 0));
    }
}
