//! A small deterministic PRNG (xoshiro256**, seeded through SplitMix64) and
//! stateless hashes of indices: every random draw of a run comes from the
//! run's seed, never from the OS.

/// SplitMix64: one step (also a good 64-bit mixer of an index).
pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in [0, 1) from a 64-bit hash.
pub(crate) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// xoshiro256**: a stream of draws. Each use (mesh, faults, loss, ...) has
/// its own stream, so changing one model does not shift the others' draws.
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The stream `stream` of run seed `seed`.
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let mut x = splitmix(seed ^ splitmix(stream));
        let mut s = [0u64; 4];
        for v in &mut s {
            x = splitmix(x);
            *v = x;
        }
        Self { s }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        unit(self.next_u64())
    }

    /// Uniform in [0, n) (n > 0; the modulo bias is negligible for the
    /// sizes used here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher–Yates.
    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }

    /// 32 bytes (a batch seed).
    pub(crate) fn bytes32(&mut self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for chunk in out.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(1, 2).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = Rng::new(1, 2);
        let mut y = Rng::new(1, 3);
        assert_ne!(x.next_u64(), y.next_u64());
        let u = Rng::new(9, 9).unit();
        assert!((0.0..1.0).contains(&u));
    }
}
