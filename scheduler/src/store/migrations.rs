//! The one numbered list of schema migrations both backends follow, and how a backend's migrator
//! reads its database's record of applied versions against it. The backends' migrators
//! (`postgres/migrate.rs`, `sqlite/migrate.rs`) only take their locks and run what
//! [`plan`] says; they hold no list of their own.
//!
//! **One number, one change, on every backend.** Step N is the same change of the schema on
//! PostgreSQL and on SQLite, under the same description. A step a backend has nothing to run
//! for is [`Step::Nothing`] there, with the reason, and is recorded all the same, so a
//! database's record reads alike on both. A new step names both backends' files (or says why
//! one has none), each file numbered as its step.
//!
//! Before the numbers were aligned the SQLite list had 14 steps of its own numbering
//! ([`SQLITE_BEFORE_ALIGNMENT`]); its files keep their names, so the list names each step's
//! file. A database whose record carries that numbering is carried over once, by the first
//! migrator to see it: its recorded versions are rewritten to the aligned ones, in the same
//! transaction, under the same lock, as the steps it still lacks, so two nodes starting at
//! once carry it over once.
//!
//! Never edit a step that has landed, nor its description: databases record both.

/// A step of the schema, the same number and description on every backend.
#[derive(Debug, PartialEq)]
pub(crate) struct Migration {
    /// Its number: steps apply in this order, each once.
    pub(crate) version: i64,
    /// What it changes, as each database records it.
    pub(crate) description: &'static str,
    /// What PostgreSQL runs for it.
    #[cfg(feature = "postgres")]
    pub(crate) postgres: Step,
    /// What SQLite runs for it.
    #[cfg(feature = "sqlite")]
    pub(crate) sqlite: Step,
}

/// What a backend runs for a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Step {
    /// A file of `scheduler/migrations/<backend>/`.
    File {
        /// Its name.
        name: &'static str,
        /// Its text, included at compile time.
        sql: &'static str,
    },
    /// Nothing: the backend has no such change to make, for this reason. The step is recorded.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    Nothing(&'static str),
}

impl Step {
    /// The SQL to run; `None` for a step that runs nothing.
    pub(crate) fn sql(self) -> Option<&'static str> {
        match self {
            Step::File { sql, .. } => Some(sql),
            Step::Nothing(_) => None,
        }
    }
}

/// `Step::File` of a backend's migration file.
macro_rules! migration_file {
    ($backend:literal, $name:literal) => {
        Step::File {
            name: $name,
            sql: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/migrations/",
                $backend,
                "/",
                $name
            )),
        }
    };
}

/// A step of [`MIGRATIONS`]: its number, its description, and each backend's part (a file name
/// in `scheduler/migrations/<backend>/`, or `nothing("why")`).
macro_rules! step {
    ($version:literal, $description:literal, postgres: $postgres:tt, sqlite: $sqlite:tt $(,)?) => {
        Migration {
            version: $version,
            description: $description,
            #[cfg(feature = "postgres")]
            postgres: step!(@part "postgres", $postgres),
            #[cfg(feature = "sqlite")]
            sqlite: step!(@part "sqlite", $sqlite),
        }
    };
    (@part $backend:literal, (nothing($reason:literal))) => {
        Step::Nothing($reason)
    };
    (@part $backend:literal, $file:literal) => {
        migration_file!($backend, $file)
    };
}

/// Every step, in order.
pub(crate) const MIGRATIONS: &[Migration] = &[
    step!(1, "init", postgres: "0001_init.sql", sqlite: "0001_init.sql"),
    step!(2, "guarantees",
        postgres: "0002_guarantees.sql",
        sqlite: (nothing("SQLite's step 1 (0001_init.sql) made this step's schema already"))),
    step!(3, "policies",
        postgres: "0003_policies.sql",
        sqlite: "0002_policies_and_operations.sql"),
    step!(4, "operations",
        postgres: "0004_operations.sql",
        sqlite: (nothing("SQLite's step 3 (0002_policies_and_operations.sql) made this step's schema already"))),
    step!(5, "run query indexes",
        postgres: "0005_run_query_indexes.sql",
        sqlite: "0003_run_query_indexes.sql"),
    step!(6, "hot renewals",
        postgres: "0006_hot_renewals.sql",
        sqlite: (nothing("heap-only-tuple updates and a table's fillfactor are PostgreSQL's; SQLite has neither"))),
    step!(7, "drop an unread run index",
        postgres: "0007_drop_unread_run_index.sql",
        sqlite: (nothing("made for PostgreSQL alone (cae50a9): SQLite's run table keeps scheduler_runs_task_idx"))),
    step!(8, "cancel requests",
        postgres: "0008_cancel_requests.sql",
        sqlite: "0004_cancel_requests.sql"),
    step!(9, "run start unknown",
        postgres: "0009_run_start_unknown.sql",
        sqlite: "0005_run_start_unknown.sql"),
    step!(10, "fencing tokens",
        postgres: "0010_fencing_tokens.sql",
        sqlite: "0006_fencing_tokens.sql"),
    step!(11, "incidents", postgres: "0011_incidents.sql", sqlite: "0007_incidents.sql"),
    step!(12, "backfills", postgres: "0012_backfills.sql", sqlite: "0008_backfills.sql"),
    step!(13, "calendars", postgres: "0013_calendars.sql", sqlite: "0009_calendars.sql"),
    step!(14, "outbox channels",
        postgres: "0014_outbox_channels.sql",
        sqlite: "0010_outbox_channels.sql"),
    step!(15, "shards", postgres: "0015_shards.sql", sqlite: "0011_shards.sql"),
    step!(16, "broadcast", postgres: "0016_broadcast.sql", sqlite: "0012_broadcast.sql"),
    step!(17, "node services",
        postgres: "0017_node_services.sql",
        sqlite: "0013_node_services.sql"),
    step!(18, "node database server",
        postgres: "0018_node_database_server.sql",
        sqlite: "0014_node_database_server.sql"),
    step!(19, "instances", postgres: "0019_instances.sql", sqlite: "0019_instances.sql"),
    step!(20, "run args override",
        postgres: "0020_run_args_override.sql",
        sqlite: "0020_run_args_override.sql"),
    step!(21, "instance sources",
        postgres: "0021_instance_sources.sql",
        sqlite: "0021_instance_sources.sql"),
    step!(22, "jitter", postgres: "0022_jitter.sql", sqlite: "0022_jitter.sql"),
    step!(23, "limits", postgres: "0023_limits.sql", sqlite: "0023_limits.sql"),
    step!(24, "instance tags",
        postgres: "0024_instance_tags.sql",
        sqlite: "0024_instance_tags.sql"),
    step!(25, "instance sla calendar",
        postgres: "0025_instance_sla_calendar.sql",
        sqlite: "0025_instance_sla_calendar.sql"),
    step!(26, "backfill rows",
        postgres: "0026_backfill_rows.sql",
        sqlite: "0026_backfill_rows.sql"),
    step!(27, "prior run", postgres: "0027_prior_run.sql", sqlite: "0027_prior_run.sql"),
];

/// The SQLite numbering before the alignment, as its databases recorded it: `(version,
/// description, the aligned version)`. Never edit: it is what those databases hold.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE_BEFORE_ALIGNMENT: &[(i64, &str, i64)] = &[
    (1, "init", 1),
    (2, "policies and operations", 3),
    (3, "run query indexes", 5),
    (4, "cancel requests", 8),
    (5, "run start unknown", 9),
    (6, "fencing tokens", 10),
    (7, "incidents", 11),
    (8, "backfills", 12),
    (9, "calendars", 13),
    (10, "outbox channels", 14),
    (11, "shards", 15),
    (12, "broadcast", 16),
    (13, "node services", 17),
    (14, "node database server", 18),
];

/// What a migrator does to a database, given its record.
#[derive(Debug, PartialEq)]
pub(crate) struct Plan {
    /// Recorded versions of an older numbering to rewrite, `(from, to, to's description)`,
    /// highest first: every `to` is above its `from` and the map rises, so no rewrite meets a
    /// version still to be moved.
    pub(crate) renumber: Vec<(i64, i64, &'static str)>,
    /// The steps the database lacks, in order.
    pub(crate) pending: Vec<&'static Migration>,
}

/// Why a migrator must not touch a database.
#[derive(Debug, PartialEq)]
pub(crate) enum Refusal {
    /// It records a version this binary does not know: a newer binary migrated it.
    Newer { version: i64, known: i64 },
    /// It records an older numbering, and beside it a version that numbering never had.
    Unknown { version: i64, description: String },
}

impl Refusal {
    /// The refusal as the store's setup error, for the database `place` names.
    pub(crate) fn into_error(self, place: &str) -> super::StoreError {
        // Not transient: retrying cannot make this binary understand the schema.
        super::StoreError::setup(match self {
            Refusal::Newer { version, known } => format!(
                "{place} has migration {version}, newer than this binary knows (up to {known}); \
                 upgrade this binary"
            ),
            Refusal::Unknown {
                version,
                description,
            } => format!(
                "{place} records migration {version} `{description}` beside the numbering before \
                 the alignment, which never had it; its record of migrations needs a look by hand"
            ),
        })
    }
}

/// What to do to a database whose record is `recorded` (`(version, description)`, as read),
/// on a backend whose databases may carry the numbering `before` (`(version, description,
/// aligned version)`; empty if the backend never had another).
///
/// The older numbering is recognised by a recorded version under the description it had there
/// and not in the aligned list; then every recorded version must be one of it.
pub(crate) fn plan(
    recorded: &[(i64, String)],
    before: &[(i64, &str, i64)],
) -> Result<Plan, Refusal> {
    let known = MIGRATIONS.last().map_or(0, |m| m.version);
    let older = |&(version, ref description): &(i64, String)| {
        before
            .iter()
            .any(|&(v, d, _)| v == version && d == description)
            && !MIGRATIONS
                .iter()
                .any(|m| m.version == version && m.description == description)
    };
    let mut renumber = Vec::new();
    let mut applied: Vec<i64> = recorded.iter().map(|&(v, _)| v).collect();
    if recorded.iter().any(older) {
        applied.clear();
        let mut highest_first: Vec<&(i64, String)> = recorded.iter().collect();
        highest_first.sort_by_key(|&&(v, _)| std::cmp::Reverse(v));
        for (version, description) in highest_first {
            let Some(&(_, _, to)) = before
                .iter()
                .find(|&&(v, d, _)| v == *version && d == description)
            else {
                return Err(Refusal::Unknown {
                    version: *version,
                    description: description.clone(),
                });
            };
            let step = MIGRATIONS
                .iter()
                .find(|m| m.version == to)
                .expect("an older numbering maps onto the list");
            if to != *version || step.description != description {
                renumber.push((*version, to, step.description));
            }
            applied.push(to);
        }
    }
    if let Some(&version) = applied.iter().find(|&&v| v > known) {
        return Err(Refusal::Newer { version, known });
    }
    let pending = MIGRATIONS
        .iter()
        .filter(|m| !applied.contains(&m.version))
        .collect();
    Ok(Plan { renumber, pending })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rows: &[(i64, &str)]) -> Vec<(i64, String)> {
        rows.iter().map(|&(v, d)| (v, d.to_owned())).collect()
    }

    fn versions(plan: &Plan) -> Vec<i64> {
        plan.pending.iter().map(|m| m.version).collect()
    }

    #[test]
    fn the_steps_are_numbered_one_by_one_with_distinct_descriptions() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.description);
            assert!(
                MIGRATIONS[..i]
                    .iter()
                    .all(|o| o.description != m.description),
                "`{}` twice",
                m.description
            );
        }
    }

    /// Each backend's directory holds exactly the files the list names, each once, in the
    /// list's order; a file added after the alignment carries its step's number.
    #[test]
    fn each_backends_files_are_the_lists() {
        let mut backends: Vec<(&str, Vec<(i64, Step)>)> = Vec::new();
        #[cfg(feature = "postgres")]
        backends.push((
            "postgres",
            MIGRATIONS.iter().map(|m| (m.version, m.postgres)).collect(),
        ));
        #[cfg(feature = "sqlite")]
        backends.push((
            "sqlite",
            MIGRATIONS.iter().map(|m| (m.version, m.sqlite)).collect(),
        ));
        for (backend, steps) in backends {
            let dir = format!("{}/migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
            let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".sql"))
                .collect();
            on_disk.sort();
            let named: Vec<String> = steps
                .iter()
                .filter_map(|(_, s)| match s {
                    Step::File { name, .. } => Some((*name).to_owned()),
                    Step::Nothing(reason) => {
                        assert!(!reason.is_empty());
                        None
                    }
                })
                .collect();
            assert_eq!(named, on_disk, "{backend}: the list's files, in order");
            for (version, step) in &steps {
                let Step::File { name, .. } = step else {
                    continue;
                };
                let number: i64 = name[..4].parse().unwrap();
                let renamed = backend == "sqlite" && *version <= 18;
                assert!(
                    number == *version || renamed,
                    "{backend}: {name} is step {version}: name it {version:04}_..."
                );
            }
        }
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn the_sqlite_numbering_before_the_alignment_rises_onto_the_list() {
        let mut last = 0;
        for &(from, description, to) in SQLITE_BEFORE_ALIGNMENT {
            assert!(to >= from && to > last, "{from} -> {to}");
            last = to;
            let step = MIGRATIONS.iter().find(|m| m.version == to).unwrap();
            assert!(
                step.sqlite.sql().is_some(),
                "{from} `{description}` ran a file: so does step {to}"
            );
        }
        // Of the steps up to the alignment, those with a file on SQLite are its older steps;
        // the others run nothing there.
        let mapped: Vec<i64> = SQLITE_BEFORE_ALIGNMENT.iter().map(|m| m.2).collect();
        for m in MIGRATIONS.iter().take_while(|m| m.version <= 18) {
            assert_eq!(
                m.sqlite.sql().is_some(),
                mapped.contains(&m.version),
                "step {}",
                m.version
            );
        }
    }

    #[test]
    fn a_new_database_gets_every_step() {
        let plan = plan(&[], &[]).unwrap();
        assert!(plan.renumber.is_empty());
        assert_eq!(versions(&plan).len(), MIGRATIONS.len());
    }

    #[test]
    fn an_aligned_record_goes_on_from_where_it_stopped() {
        let rows: Vec<(i64, &str)> = MIGRATIONS[..12]
            .iter()
            .map(|m| (m.version, m.description))
            .collect();
        let plan = plan(&record(&rows), &[(2, "policies and operations", 3)]).unwrap();
        assert!(plan.renumber.is_empty());
        assert_eq!(
            versions(&plan),
            (13..=MIGRATIONS.len() as i64).collect::<Vec<_>>()
        );
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn an_sqlite_record_before_the_alignment_is_renumbered_highest_first() {
        let rows = record(&[
            (1, "init"),
            (2, "policies and operations"),
            (3, "run query indexes"),
            (4, "cancel requests"),
        ]);
        let plan = plan(&rows, SQLITE_BEFORE_ALIGNMENT).unwrap();
        assert_eq!(
            plan.renumber,
            [
                (4, 8, "cancel requests"),
                (3, 5, "run query indexes"),
                (2, 3, "policies")
            ]
        );
        let mut rest = vec![2, 4, 6, 7];
        rest.extend(9..=MIGRATIONS.len() as i64);
        assert_eq!(versions(&plan), rest);
        // A record of step 1 alone reads the same in both numberings.
        let plan = super::plan(&record(&[(1, "init")]), SQLITE_BEFORE_ALIGNMENT).unwrap();
        assert!(plan.renumber.is_empty());
        assert_eq!(versions(&plan).len(), MIGRATIONS.len() - 1);
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn a_record_that_mixes_numberings_or_runs_ahead_is_refused() {
        let mixed = record(&[(1, "init"), (2, "policies and operations"), (15, "shards")]);
        assert_eq!(
            plan(&mixed, SQLITE_BEFORE_ALIGNMENT),
            Err(Refusal::Unknown {
                version: 15,
                description: "shards".into()
            })
        );
        let known = MIGRATIONS.len() as i64;
        let ahead = record(&[(1, "init"), (known + 1, "from the future")]);
        assert_eq!(
            plan(&ahead, SQLITE_BEFORE_ALIGNMENT),
            Err(Refusal::Newer {
                version: known + 1,
                known
            })
        );
    }
}
