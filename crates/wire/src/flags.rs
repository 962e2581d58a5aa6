//! The shape shared by the protocol's bit-flag fields: a `u32` newtype with named
//! constants, set operations and a `Debug` that lists the names.

/// Declares a `u32` bit-flag newtype: `pub struct Name(pub u32)` with the given
/// associated constants, `bits`, `empty`, `contains`, `intersects`, `is_empty`,
/// `insert`, `remove`, the bit operators, `From<u32>`/`Into<u32>` and a `Debug` listing
/// the single-bit names set.
macro_rules! bit_flags {
    (
        $(#[$meta:meta])*
        pub struct $name:ident;
        $(
            $(#[$cmeta:meta])*
            const $flag:ident = $value:expr;
        )*
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            $(
                $(#[$cmeta])*
                pub const $flag: $name = $name($value);
            )*

            /// No bits set.
            pub const fn empty() -> $name {
                $name(0)
            }

            /// The raw wire value.
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// Whether every bit of `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any bit of `other` is set in `self`.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// Whether no bit is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// `self` with the bits of `other` added.
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            /// `self` with the bits of `other` cleared.
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }

            /// Sets the bits of `other`.
            pub fn insert(&mut self, other: $name) {
                self.0 |= other.0;
            }

            /// Clears the bits of `other`.
            pub fn remove(&mut self, other: $name) {
                self.0 &= !other.0;
            }

            /// The named constants, for `Debug`.
            const NAMES: &'static [(&'static str, u32)] = &[$((stringify!($flag), $value)),*];
        }

        impl ::core::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl ::core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }

        impl ::core::ops::BitAnd for $name {
            type Output = $name;
            fn bitand(self, rhs: $name) -> $name {
                $name(self.0 & rhs.0)
            }
        }

        impl ::core::ops::BitAndAssign for $name {
            fn bitand_assign(&mut self, rhs: $name) {
                self.0 &= rhs.0;
            }
        }

        impl ::core::ops::Not for $name {
            type Output = $name;
            fn not(self) -> $name {
                $name(!self.0)
            }
        }

        impl From<u32> for $name {
            fn from(v: u32) -> $name {
                $name(v)
            }
        }

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 {
                v.0
            }
        }

        impl ::core::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                write!(f, "{}({:#010x}", stringify!($name), self.0)?;
                let mut sep = ": ";
                let mut rest = self.0;
                for (n, v) in Self::NAMES {
                    if v.count_ones() == 1 && rest & v != 0 {
                        write!(f, "{sep}{n}")?;
                        sep = " | ";
                        rest &= !v;
                    }
                }
                if rest != 0 {
                    write!(f, "{sep}{rest:#x}")?;
                }
                f.write_str(")")
            }
        }
    };
}

pub(crate) use bit_flags;
