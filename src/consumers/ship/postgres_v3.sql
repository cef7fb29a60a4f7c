-- transcript-sync's PostgreSQL schema, version 3: other machines pull from the store.

-- The order in which each machine's records arrived: a machine's record transactions commit
-- one at a time (each takes an advisory lock of its machine's), so its records become
-- visible in `pull_id` order, and a puller that has every record up to a `pull_id` has
-- every one before it. Existing rows are numbered as this runs.
ALTER TABLE {schema}.records ADD COLUMN pull_id bigserial;
CREATE INDEX records_pull ON {schema}.records (machine, pull_id);

-- The project's git remote, from the machine's own index: the same repository found on
-- machines whose paths differ.
ALTER TABLE {schema}.sessions ADD COLUMN git_remote text;
CREATE INDEX sessions_updated ON {schema}.sessions (machine, updated_at);
