//! A small, fast, seedable generator (xorshift64*) for offsets, the read/write mix and
//! random buffer contents. Not cryptographic; reproducible for a given `-z` seed.

/// xorshift64* state.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` and `stream` (e.g. a thread number); distinct streams of one
    /// seed give unrelated sequences.
    pub fn new(seed: u64, stream: u64) -> Rng {
        // splitmix64 of the pair, so that small seeds still give well-mixed states.
        let mut z = seed
            .wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x853C_49E6_748F_EA9B } else { z })
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`n` > 0), by multiply-shift (bias below 2^-32 for n < 2^32).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(1, 0).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::new(1, 0).next_u64(), Rng::new(1, 1).next_u64());
        assert_ne!(Rng::new(0, 0).next_u64(), Rng::new(1, 0).next_u64());
    }

    #[test]
    fn below_stays_below() {
        let mut r = Rng::new(7, 0);
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
    }

    #[test]
    fn fill_is_not_zero() {
        let mut b = vec![0u8; 4099];
        Rng::new(0, 0).fill(&mut b);
        assert!(b.iter().filter(|&&x| x == 0).count() < 100);
    }
}
