//! The shape every run-status enum shares (job runs, agent runs): the
//! reference's upper-case strings, a parse that refuses anything else, and
//! which statuses are final. One macro so the two cannot drift apart.

/// Declares a run-status enum: `Variant => "TEXT", terminal` per status.
macro_rules! run_status {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal, $terminal:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every status, in declaration order.
            pub const ALL: &'static [$name] = &[$( $name::$variant ),+];

            /// The wire string (the record field's value).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }

            /// The status a wire string names, `None` for anything else
            /// (case matters: the wire is upper case).
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $( $text => Some($name::$variant), )+
                    _ => None,
                }
            }

            /// Whether a run in this status never changes again.
            pub const fn is_terminal(self) -> bool {
                match self {
                    $( $name::$variant => $terminal ),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::run_status::UnknownStatus;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::parse(text).ok_or_else(|| $crate::run_status::UnknownStatus(text.to_owned()))
            }
        }
    };
}

pub(crate) use run_status;

/// A status string no enum of this version knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown run status {0:?}")]
pub struct UnknownStatus(pub String);
