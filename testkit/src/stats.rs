//! Quantiles of measured times, one definition for every table.

/// The `q` quantile (0 to 1) of `sorted` (ascending) by the nearest-rank definition: the
/// value at rank ⌈q × len⌉, counting from 1, clamped to the first and the last value. So the
/// median of an even count is the lower of the two middle values, and p99 of 1,000 values is
/// the 990th. NaN when `sorted` is empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// [`quantile`] of values in any order.
pub fn quantile_of(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile(&sorted, q)
}

/// The median of values in any order: the lower of the two middle values for an even count.
pub fn median(values: &[f64]) -> f64 {
    quantile_of(values, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_takes_the_value_at_the_ceiling_of_q_times_len() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 5.0);
        assert_eq!(quantile(&v, 0.9), 9.0);
        assert_eq!(quantile(&v, 0.91), 10.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 10.0);
    }

    #[test]
    fn p99_of_a_thousand_values_is_the_990th() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.99), 990.0);
    }

    #[test]
    fn median_of_an_even_count_is_the_lower_middle_value_in_any_order() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn quantile_of_nothing_is_nan() {
        assert!(quantile(&[], 0.5).is_nan());
    }
}
