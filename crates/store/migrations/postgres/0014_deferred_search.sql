-- PostgreSQL only: full-text search indexed outside the write transaction (issue 17).
--
-- Before: `conversations.content_tsv` was a generated `to_tsvector('english', content)`
-- column with a GIN index, so every message insert paid for stemming and for the GIN
-- insertion (about 12k messages/s at most). Now a message insert only adds its id to
-- `conversation_search_pending` (a statement trigger, one narrow multi-row insert per
-- statement); the store's background indexer moves pending ids into `conversation_search`
-- (id, tsvector) in batches. Search reads the index and the (small) pending tail, so a
-- message is findable as soon as it is committed. See `src/search_indexer.rs` and the
-- "Search" paragraph of docs/architecture.md.
--
-- A side table rather than a nullable `content_tsv` filled later: filling a column is an
-- UPDATE of the conversation row, which writes a second heap version of every message and
-- new entries in all its indexes (no HOT update, the GIN column changes); the side table
-- keeps `conversations` insert-only. A pending table rather than an `id > watermark` scan:
-- identity ids can commit out of order, and a pending row becomes visible exactly when its
-- message does.
--
-- SQLite has no counterpart (FTS5 triggers stay synchronous there): the migration sets are
-- applied by separate migrators, so the numbers need not line up.

-- Writers from other nodes wait until the migration commits: rows committed before the lock
-- are backfilled below, rows inserted after it go through the trigger.
LOCK TABLE conversations IN ACCESS EXCLUSIVE MODE;

CREATE TABLE conversation_search (
    id  BIGINT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
    tsv TSVECTOR NOT NULL
);

-- Messages committed but not yet indexed. No foreign key: the insert path stays one narrow
-- B-tree insert per message; the indexer drops ids whose message was deleted meanwhile.
CREATE TABLE conversation_search_pending (
    id BIGINT PRIMARY KEY
);

-- Backfill from the generated column (already computed: no re-stemming), then build the GIN
-- index in one pass, far cheaper than inserting into it row by row.
INSERT INTO conversation_search (id, tsv)
    SELECT id, content_tsv FROM conversations WHERE content IS NOT NULL;
CREATE INDEX idx_conversation_search_tsv ON conversation_search USING GIN (tsv);

DROP INDEX idx_conversations_content_tsv;
ALTER TABLE conversations DROP COLUMN content_tsv;

-- One statement-level trigger (not per row): the new ids of a multi-row insert are queued
-- with one INSERT ... SELECT from the transition table. Rows without content never match a
-- search and are not queued.
CREATE FUNCTION conversation_search_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO conversation_search_pending (id)
        SELECT id FROM new_rows WHERE content IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER conversations_search_enqueue
    AFTER INSERT ON conversations
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION conversation_search_enqueue();
