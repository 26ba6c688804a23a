//! `--partition K/N`: one of N shards of a cell selection, for a CI matrix over machines.

use std::fmt;
use std::str::FromStr;

/// Shard `index` (1-based) of `count`: the cells at positions `index-1`, `index-1+count`, … of
/// the selection. Every shard sees the same selection (same filters, same drivers file), so the
/// shards together hold every selected cell exactly once; round-robin spreads each suite's slow
/// real-Codex cells over the shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub index: usize,
    pub count: usize,
}

impl Partition {
    /// The items of this shard, in their order.
    pub fn select<T>(&self, items: impl IntoIterator<Item = T>) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index - 1)
            .map(|(_, item)| item)
            .collect()
    }
}

impl FromStr for Partition {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("partition `{text}` must be K/N with 1 <= K <= N (e.g. 2/4)");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_item_exactly_once() {
        let items: Vec<usize> = (0..11).collect();
        let mut all: Vec<usize> = (1..=4)
            .flat_map(|k| Partition { index: k, count: 4 }.select(items.clone()))
            .collect();
        all.sort();
        assert_eq!(all, items);
        assert_eq!(
            "2/4".parse::<Partition>().unwrap().select(items),
            vec![1, 5, 9]
        );
    }

    #[test]
    fn bad_partitions_are_refused() {
        for bad in ["0/3", "4/3", "1/0", "1", "a/b", "1/2/3", ""] {
            assert!(bad.parse::<Partition>().is_err(), "{bad}");
        }
        assert_eq!("3/3".parse::<Partition>().unwrap().to_string(), "3/3");
    }
}
