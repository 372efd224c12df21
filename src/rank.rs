//! Nearest-rank quantiles of sorted values, the one rule behind every median and p90 this crate
//! prints (`judge simulate`, `plan backtest --windows`, the simulated world's figures), with the
//! censored form: runs that never decided counted after every one that did.

/// The index in a sorted list of `n` values of its `q` quantile (0 to 1) by nearest rank: the
/// smallest rank whose share of the values reaches `q`. `None` when `n` is 0.
pub fn nearest_rank(n: usize, q: f64) -> Option<usize> {
    if n == 0 {
        return None;
    }
    Some(((q * n as f64).ceil() as usize).clamp(1, n) - 1)
}

/// The `q` quantile of `decided` (sorted) among `decided.len() + undecided` values, the
/// undecided ones counted after every decided one: `None` when it falls among them (or there
/// are none at all).
pub fn censored<T: Copy>(decided: &[T], undecided: usize, q: f64) -> Option<T> {
    nearest_rank(decided.len() + undecided, q).and_then(|i| decided.get(i).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rank_is_the_smallest_whose_share_reaches_q() {
        assert_eq!(nearest_rank(0, 0.5), None);
        assert_eq!(nearest_rank(1, 0.5), Some(0));
        assert_eq!(nearest_rank(10, 0.5), Some(4));
        assert_eq!(nearest_rank(10, 0.9), Some(8));
        assert_eq!(nearest_rank(10, 0.0), Some(0));
        assert_eq!(nearest_rank(10, 1.0), Some(9));
        // Undecided values come after every decided one.
        assert_eq!(censored(&[1, 2, 3], 1, 0.5), Some(2));
        assert_eq!(censored(&[1, 2, 3], 7, 0.5), None);
        assert_eq!(censored::<i64>(&[], 0, 0.5), None);
    }
}
