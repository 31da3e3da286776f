//! Which way of a link: one direction ([`Way`]) and the directions a change is for ([`Ways`]),
//! written `a-b`, `b-a` and `both` everywhere (topology files, the engine's requests, the
//! HTTP API, the command line, state files).

/// Which way a direction carries frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Way {
    /// From node A to node B.
    AToB,
    /// From node B to node A.
    BToA,
}

impl Way {
    /// `a-b` or `b-a`, as the command line writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Way::AToB => "a-b",
            Way::BToA => "b-a",
        }
    }
}

/// Which directions of a link a change is for.
// The API document names this schema `Dir` (Python's types and clients depend on it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Dir))]
pub enum Ways {
    /// Both directions.
    #[default]
    #[serde(rename = "both")]
    Both,
    /// From the first endpoint to the second.
    #[serde(rename = "a-b")]
    AToB,
    /// From the second endpoint to the first.
    #[serde(rename = "b-a")]
    BToA,
}

impl Ways {
    /// The directions, in the order they are changed.
    pub fn ways(self) -> &'static [Way] {
        match self {
            Ways::AToB => &[Way::AToB],
            Ways::BToA => &[Way::BToA],
            Ways::Both => &[Way::AToB, Way::BToA],
        }
    }

    /// Whether the change applies to direction `way`.
    pub fn includes(self, way: Way) -> bool {
        self.ways().contains(&way)
    }

    /// `a-b`, `b-a` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ways::AToB => "a-b",
            Ways::BToA => "b-a",
            Ways::Both => "both",
        }
    }

    /// The directions `a-b`, `b-a` or `both` name; `None` for any other word (the caller
    /// says where it was).
    pub fn parse(word: &str) -> Option<Ways> {
        [Ways::AToB, Ways::BToA, Ways::Both]
            .into_iter()
            .find(|w| w.as_str() == word)
    }
}

// By hand rather than derived: the variants' order is the API document's (`both` first), the
// command line lists `a-b`, `b-a`, `both` as it always did, and the words stay `as_str`'s.
#[cfg(feature = "clap")]
impl clap::ValueEnum for Ways {
    fn value_variants<'a>() -> &'a [Self] {
        &[Ways::AToB, Ways::BToA, Ways::Both]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            Ways::AToB => "From the link's first endpoint to its second",
            Ways::BToA => "From the second to the first",
            Ways::Both => "Both ways",
        };
        Some(clap::builder::PossibleValue::new(self.as_str()).help(help))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_and_means_its_directions() {
        for (ways, word, ab, ba) in [
            (Ways::AToB, "a-b", true, false),
            (Ways::BToA, "b-a", false, true),
            (Ways::Both, "both", true, true),
        ] {
            assert_eq!(Ways::parse(word), Some(ways));
            assert_eq!(ways.as_str(), word);
            assert_eq!(serde_json::to_string(&ways).unwrap(), format!("\"{word}\""));
            assert_eq!(
                (ways.includes(Way::AToB), ways.includes(Way::BToA)),
                (ab, ba)
            );
            let listed: Vec<&str> = ways.ways().iter().map(|w| w.as_str()).collect();
            assert_eq!(listed.join(" "), word.replace("both", "a-b b-a"));
        }
        assert_eq!(Ways::parse("ab"), None);
        assert_eq!(Ways::parse("Both"), None);
        assert_eq!(Ways::default(), Ways::Both);
    }
}
