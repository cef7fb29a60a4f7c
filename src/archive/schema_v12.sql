-- Schema version 12: the order in which sessions' marks changed, which the sinks that ship
-- marks follow. A session has one row, made again (with a new seq) by every change of its
-- marks: a sink that has shipped the changes up to a seq has shipped the current marks of
-- every session whose row is at or below it. AUTOINCREMENT: no seq is ever given twice.
CREATE TABLE mark_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    -- The archive's last record seq when the marks changed: a sink ships the change once it
    -- has shipped the records up to it, so marks never reach a sink before their records.
    records_seq INTEGER NOT NULL,
    UNIQUE (machine, harness, session)
);
-- The marks made before this schema, in the order they last changed.
INSERT INTO mark_changes (machine, harness, session, records_seq)
    SELECT machine, harness, session, (SELECT coalesce(max(seq), 0) FROM records)
    FROM marks ORDER BY changed_ms;
