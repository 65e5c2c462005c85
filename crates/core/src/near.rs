//! The names a mistyped one probably meant: a config key's known fields,
//! the cluster's topics for a topic that does not exist.

/// Up to `most` of `candidates` closest to `name` that are plausible typos
/// of it (at most one edit for names of up to four characters, else two;
/// case ignored), closest first, then by name. Two edits, not more, for
/// long names too: topics sharing a long prefix (`shop.public.items`,
/// `shop.public.users`) are not typos of each other.
pub fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    most: usize,
) -> Vec<&'a str> {
    let chars = name.chars().count();
    let limit = if chars <= 4 { 1 } else { 2 };
    let lower = name.to_lowercase();
    let mut near: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .collect();
    near.sort();
    near.dedup_by(|a, b| a.1 == b.1);
    near.into_iter().take(most).map(|(_, c)| c).collect()
}

/// Edits (insert, delete, replace, swap two neighbours) from `a` to `b`,
/// by characters (optimal string alignment distance).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_of_a_topic_finds_it_and_an_unrelated_name_finds_nothing() {
        let topics = ["orders", "orders_v2", "customers", "payments"];
        assert_eq!(closest("ordres", topics, 3), ["orders"]);
        assert_eq!(closest("Orders-v2", topics, 3), ["orders_v2"]);
        assert_eq!(closest("order", topics, 3), ["orders"]);
        assert!(closest("invoices", topics, 3).is_empty());
        // Long names: two edits, however long the shared prefix.
        let long = ["shop.public.customer_addresses", "shop.public.users"];
        assert_eq!(
            closest("shop.public.custmer_adresses", long, 3),
            ["shop.public.customer_addresses"]
        );
        assert!(closest("shop.public.items", long, 3).is_empty());
    }

    #[test]
    fn edits_count_swaps_as_one() {
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
