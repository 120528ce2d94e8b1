//! Newtype ids for ports, lcores and queues, so a queue number is never passed as a port. Debug
//! prints them the way logs talk about them: `port3`, `lcore1`, `queue0`.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $inner:ty, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                $name(v)
            }
        }
    };
}

id_type!(
    /// An ethdev port id (`uint16_t port_id`).
    PortId, u16, "port"
);
id_type!(
    /// An EAL logical core id (`unsigned lcore_id`).
    LcoreId, u32, "lcore"
);
id_type!(
    /// An RX or TX queue index within one port.
    QueueId, u16, "queue"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_like_logs() {
        assert_eq!(format!("{:?}", PortId(3)), "port3");
        assert_eq!(format!("{:?}", LcoreId(1)), "lcore1");
        assert_eq!(format!("{}", QueueId(0)), "queue0");
        assert_eq!(PortId::from(7), PortId(7));
    }
}
