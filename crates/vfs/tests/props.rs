//! Property tests: hostile names never panic and never yield unsafe components.

use proptest::prelude::*;
use smbx_vfs::*;

fn name_chars() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('\\'),
            Just('/'),
            Just('.'),
            Just(':'),
            Just('*'),
            Just('<'),
            Just('>'),
            Just('"'),
            Just('?'),
            Just('\0'),
            Just('a'),
            Just('B'),
            Just('$'),
            any::<char>(),
        ],
        0..40,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #[test]
    fn parse_never_panics_and_components_are_safe(s in name_chars()) {
        if let Ok(p) = SmbPath::parse(&s) {
            for c in &p.components {
                prop_assert!(!c.is_empty());
                prop_assert!(c != "." && c != "..");
                prop_assert!(!c.contains('/') && !c.contains('\\') && !c.contains(':') && !c.contains('\0'));
            }
            if let Some(st) = &p.stream {
                prop_assert!(!st.is_empty() && st != "." && st != "..");
                prop_assert!(!st.contains('/') && !st.contains('\\') && !st.contains(':') && !st.contains('\0'));
            }
        }
    }

    #[test]
    fn wildcard_never_panics(p in name_chars(), n in name_chars()) {
        let _ = wildcard_match(&p, &n, false);
        let _ = wildcard_match(&p, &n, true);
    }

    #[test]
    fn star_matches_everything_and_literal_matches_itself(n in "[a-zA-Z0-9 ._-]{0,30}") {
        prop_assert!(wildcard_match("*", &n, true));
        prop_assert!(wildcard_match(&n, &n, true));
        prop_assert!(wildcard_match(&n.to_uppercase(), &n, false));
    }

    #[test]
    fn short_names_are_8_3(n in "[a-zA-Z0-9 ._~-]{1,40}") {
        if let Some(s) = short_name(&n) {
            let (b, e) = s.split_once('.').unwrap_or((&s, ""));
            prop_assert!(!b.is_empty() && b.len() <= 8 && e.len() <= 3, "{}", s);
            prop_assert!(short_name(&s).is_none(), "{}", s);
        }
    }
}
