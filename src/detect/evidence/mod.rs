//! A finding's evidence, typed: for each kind (and each of its shapes: one device or a group
//! of them), a struct whose fields say their unit by their type ([`units`]). It is written to
//! JSON as the object of its fields, in the order of their names (the order the JSON has
//! always had), so the snapshot, `serve`, `analyze` and `export` write what they always have;
//! the views format each field from its [`Figure`]. What a finding's figures call for (the
//! advice to come) belongs in this type too, worked out from these fields by kind.
//!
//! Read back (a [`Finding`](super::Finding) deserialised from a file), evidence takes the
//! first shape of its kind that writes back to the same JSON; evidence that fits none (a
//! file of another strata, with a field renamed or added) is kept whole as
//! [`Evidence::Untyped`] and shown field by field as it was read, without units.

use super::FindingKind;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Declares evidence structs: each derives its JSON and lists its fields with their units
/// ([`units::Field`]), in the order they are declared, which is the JSON's: by name.
macro_rules! evidence {
    ($(
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty, )*
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }

        impl $name {
            /// Its fields as the JSON names them, each with its unit.
            #[allow(unused_mut)]
            $vis fn fields(&self) -> $crate::detect::evidence::Fields<'_> {
                let mut out = Vec::new();
                $(
                    if let Some(figure) = $crate::detect::evidence::Field::figure(&self.$field) {
                        out.push((stringify!($field), figure));
                    }
                )*
                out
            }
        }
    )*};
}

/// Records a list in the evidence holds: one line each.
macro_rules! records {
    ($($name:ident),*) => {$(
        impl $crate::detect::evidence::units::Item for $name {
            fn list(items: &[Self]) -> $crate::detect::evidence::Figure<'_> {
                $crate::detect::evidence::Figure::Records(items.iter().map($name::fields).collect())
            }
        }
    )*};
}

mod of_history;
mod of_instant;
pub(crate) mod units;

pub(crate) use of_history::{
    Capacity, Climb, Forecast, Fragmentation, Idle, Oom, Retries, Verdict, WarmUpForecast,
    WarmUpVerdict, Warming,
};
pub(crate) use of_instant::{
    BadInput, Contradiction, CutShort, CutShortGroup, HeldGroup, Holder, Holding, Nothing,
    NvmlError, Refused, Stale, Suspicious, SuspiciousGroup, Unattributed, Unexplained,
    UnexplainedDevice, UnexplainedGroup, Unlisted, UnlistedDevice, UnlistedGroup,
};
pub(crate) use units::{Field, Fields, Figure};

/// The figures behind a finding, by kind and shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Evidence {
    /// A context whose process is gone or defunct, with who holds its device file open.
    ZombieContext(Holding),
    /// Many zombie contexts, as one finding.
    ZombieContexts(HeldGroup),
    NotVisibleHolder(Holding),
    /// Many holders in other PID namespaces, as one finding.
    NotVisibleHolders(HeldGroup),
    UnattributedMemory(Unattributed),
    UnexplainedUsage(Unexplained),
    /// Unexplained usage on several devices.
    UnexplainedUsages(UnexplainedGroup),
    StaleFeed(Stale),
    InconsistentFeed(Nothing),
    GpuLost(Nothing),
    InconsistentCounters(Contradiction),
    RefusedFeed(Refused),
    FeedBadInput(BadInput),
    FeedDeviceUnlisted(Unlisted),
    /// Several devices of one feed.
    FeedDevicesUnlisted(UnlistedGroup),
    FeedDirCutShort(CutShort),
    /// Many feed dirs cut short.
    FeedDirsCutShort(CutShortGroup),
    SuspiciousFeedEntry(Suspicious),
    /// Many suspicious entries.
    SuspiciousFeedEntries(SuspiciousGroup),
    NvmlProblem(NvmlError),
    Climb(Climb),
    Fragmentation(Fragmentation),
    AllocRetries(Retries),
    Oom(Oom),
    Capacity(Capacity),
    IdleHolder(Idle),
    OomForecast(Forecast),
    /// A warm-up's verdict from its headroom: fits, or will not.
    WarmUp(WarmUpVerdict),
    /// A warm-up's verdict from its forecast: will not fit.
    WarmUpForecast(WarmUpForecast),
    WarmingUp(Warming),
    /// Evidence read back in no shape of its kind: kept as it was read.
    Untyped(Value),
}

impl Evidence {
    /// The kind of finding this evidence is of; `None` for evidence read back untyped.
    pub(crate) fn kind(&self) -> Option<FindingKind> {
        use Evidence as E;
        use FindingKind as K;
        Some(match self {
            E::ZombieContext(_) | E::ZombieContexts(_) => K::ZombieContext,
            E::NotVisibleHolder(_) | E::NotVisibleHolders(_) => K::NotVisibleHolder,
            E::UnattributedMemory(_) => K::UnattributedMemory,
            E::UnexplainedUsage(_) | E::UnexplainedUsages(_) => K::UnexplainedUsage,
            E::StaleFeed(_) => K::StaleFeed,
            E::InconsistentFeed(_) => K::InconsistentFeed,
            E::GpuLost(_) => K::GpuLost,
            E::InconsistentCounters(_) => K::InconsistentCounters,
            E::RefusedFeed(_) => K::RefusedFeed,
            E::FeedBadInput(_) => K::FeedBadInput,
            E::FeedDeviceUnlisted(_) | E::FeedDevicesUnlisted(_) => K::FeedDeviceUnlisted,
            E::FeedDirCutShort(_) | E::FeedDirsCutShort(_) => K::FeedDirCutShort,
            E::SuspiciousFeedEntry(_) | E::SuspiciousFeedEntries(_) => K::SuspiciousFeedEntry,
            E::NvmlProblem(_) => K::NvmlProblem,
            E::Climb(_) => K::Climb,
            E::Fragmentation(_) => K::Fragmentation,
            E::AllocRetries(_) => K::AllocRetries,
            E::Oom(_) => K::Oom,
            E::Capacity(_) => K::Capacity,
            E::IdleHolder(_) => K::IdleHolder,
            E::OomForecast(_) => K::OomForecast,
            E::WarmUp(_) | E::WarmUpForecast(_) => K::WarmUp,
            E::WarmingUp(_) => K::WarmingUp,
            E::Untyped(_) => return None,
        })
    }

    /// Its fields as the JSON names them, each with its unit.
    pub(crate) fn fields(&self) -> Fields<'_> {
        use Evidence as E;
        match self {
            E::ZombieContext(e) | E::NotVisibleHolder(e) => e.fields(),
            E::ZombieContexts(e) | E::NotVisibleHolders(e) => e.fields(),
            E::UnattributedMemory(e) => e.fields(),
            E::UnexplainedUsage(e) => e.fields(),
            E::UnexplainedUsages(e) => e.fields(),
            E::StaleFeed(e) => e.fields(),
            E::InconsistentFeed(e) | E::GpuLost(e) => e.fields(),
            E::InconsistentCounters(e) => e.fields(),
            E::RefusedFeed(e) => e.fields(),
            E::FeedBadInput(e) => e.fields(),
            E::FeedDeviceUnlisted(e) => e.fields(),
            E::FeedDevicesUnlisted(e) => e.fields(),
            E::FeedDirCutShort(e) => e.fields(),
            E::FeedDirsCutShort(e) => e.fields(),
            E::SuspiciousFeedEntry(e) => e.fields(),
            E::SuspiciousFeedEntries(e) => e.fields(),
            E::NvmlProblem(e) => e.fields(),
            E::Climb(e) => e.fields(),
            E::Fragmentation(e) => e.fields(),
            E::AllocRetries(e) => e.fields(),
            E::Oom(e) => e.fields(),
            E::Capacity(e) => e.fields(),
            E::IdleHolder(e) => e.fields(),
            E::OomForecast(e) => e.fields(),
            E::WarmUp(e) => e.fields(),
            E::WarmUpForecast(e) => e.fields(),
            E::WarmingUp(e) => e.fields(),
            E::Untyped(Value::Object(map)) => map
                .iter()
                .map(|(key, value)| (key.as_str(), Figure::Json(value)))
                .collect(),
            E::Untyped(Value::Null) => Vec::new(),
            E::Untyped(other) => vec![("", Figure::Json(other))],
        }
    }

    /// The holders of a device file it names: `None` where it names none (not a zombie
    /// context, or the device files were not searched).
    pub(crate) fn holders(&self) -> Option<&[Holder]> {
        match self {
            Evidence::ZombieContext(e) | Evidence::NotVisibleHolder(e) => e.holders.0.as_deref(),
            Evidence::ZombieContexts(e) | Evidence::NotVisibleHolders(e) => e.holders.0.as_deref(),
            _ => None,
        }
    }

    /// Its JSON, as the snapshot writes it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Evidence of a finding of `kind` read back from its JSON: the first of the kind's shapes
    /// that writes back to the same JSON, else the JSON as it was read.
    pub(crate) fn read(kind: FindingKind, json: Value) -> Evidence {
        use Evidence as E;
        use FindingKind as K;
        let typed = match kind {
            K::ZombieContext => {
                shape(&json, E::ZombieContext).or_else(|| shape(&json, E::ZombieContexts))
            }
            K::NotVisibleHolder => {
                shape(&json, E::NotVisibleHolder).or_else(|| shape(&json, E::NotVisibleHolders))
            }
            K::UnattributedMemory => shape(&json, E::UnattributedMemory),
            K::UnexplainedUsage => {
                shape(&json, E::UnexplainedUsage).or_else(|| shape(&json, E::UnexplainedUsages))
            }
            K::StaleFeed => shape(&json, E::StaleFeed),
            K::InconsistentFeed => shape(&json, E::InconsistentFeed),
            K::GpuLost => shape(&json, E::GpuLost),
            K::InconsistentCounters => shape(&json, E::InconsistentCounters),
            K::RefusedFeed => shape(&json, E::RefusedFeed),
            K::FeedBadInput => shape(&json, E::FeedBadInput),
            K::FeedDeviceUnlisted => {
                shape(&json, E::FeedDeviceUnlisted).or_else(|| shape(&json, E::FeedDevicesUnlisted))
            }
            K::FeedDirCutShort => {
                shape(&json, E::FeedDirCutShort).or_else(|| shape(&json, E::FeedDirsCutShort))
            }
            K::SuspiciousFeedEntry => shape(&json, E::SuspiciousFeedEntry)
                .or_else(|| shape(&json, E::SuspiciousFeedEntries)),
            K::NvmlProblem => shape(&json, E::NvmlProblem),
            K::Climb => shape(&json, E::Climb),
            K::Fragmentation => shape(&json, E::Fragmentation),
            K::AllocRetries => shape(&json, E::AllocRetries),
            K::Oom => shape(&json, E::Oom),
            K::Capacity => shape(&json, E::Capacity),
            K::IdleHolder => shape(&json, E::IdleHolder),
            K::OomForecast => shape(&json, E::OomForecast),
            K::WarmUp => shape(&json, E::WarmUp).or_else(|| shape(&json, E::WarmUpForecast)),
            K::WarmingUp => shape(&json, E::WarmingUp),
        };
        typed.unwrap_or(E::Untyped(json))
    }
}

/// `json` as the evidence `wrap` makes of a `T`, where it reads as one and writes back to the
/// same JSON (nothing dropped, nothing added, no number of another type).
fn shape<T: DeserializeOwned + Serialize>(
    json: &Value,
    wrap: fn(T) -> Evidence,
) -> Option<Evidence> {
    let typed = T::deserialize(json).ok()?;
    (serde_json::to_value(&typed).ok()? == *json).then(|| wrap(typed))
}

#[cfg(test)]
pub(crate) mod examples;
#[cfg(test)]
mod tests;
