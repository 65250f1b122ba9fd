//! The languages payd writes its pages and documents in.

text_enum! {
    /// A language the hosted pages and the invoice PDF speak: English, German, French.
    pub enum Locale {
        En = "en",
        De = "de",
        Fr = "fr",
    }
}

impl Locale {
    /// The language of a tag (`de`, `de-AT`, `FR-ca`): its primary subtag; `None` for one not
    /// spoken.
    pub fn of_tag(tag: &str) -> Option<Locale> {
        let primary = tag.trim().split(['-', '_']).next()?;
        Locale::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(primary))
    }
}

#[cfg(test)]
mod tests {
    use super::Locale;

    #[test]
    fn a_tag_is_read_by_its_primary_subtag() {
        assert_eq!(Locale::of_tag("fr-CA"), Some(Locale::Fr));
        assert_eq!(Locale::of_tag("DE_at"), Some(Locale::De));
        assert_eq!(Locale::of_tag(" en "), Some(Locale::En));
        assert_eq!(Locale::of_tag("xx"), None);
        assert_eq!(Locale::of_tag(""), None);
    }
}
