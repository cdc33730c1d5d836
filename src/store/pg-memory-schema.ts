/**
 * The memory tables (BURROW_MEMORY_STORE=postgres), one migration kept in its own file so it
 * merges cleanly beside other new versions: renumber it (it must only come after version 1)
 * if another migration takes its number first — no database outside tests has applied it yet.
 *
 * - `memory_tenants`: per tenant the next label, the deletions counter (replicas poll these two),
 *   the live entry count, and an incarnation that names this history of the tenant (a replica's
 *   local copy made from another history is thrown away). Its row is the tenant's write lock:
 *   adds and deletions take it first, so labels become visible in order and a session deletion
 *   cannot interleave with an add of that session's entries.
 * - `memory_entries`: the entries by (tenant, label); the document is `json` (content and metadata
 *   may hold characters `text`/`jsonb` refuse).
 * - `memory_postings`: the keyword postings, one compact block per add per tenant, rewritten
 *   without an entry's terms when it is deleted (see src/memory/posting-blocks.ts).
 * - `memory_deletions`: every deletion by (tenant, seq), for replicas to replay. Since migration 5
 *   (pg-schema.ts) each has its time, and those past a retention are forgotten (PgMemoryLog
 *   `pruneDeletions`; `memory_tenants.pruned` is the last seq forgotten).
 * - `memory_deleted_sessions`: sessions whose memories were deleted; nothing is added to them again.
 */
export const MEMORY_MIGRATION: { version: number; description: string; sql: string } = {
  version: 2,
  description: 'memory entries, posting blocks, deletions (BURROW_MEMORY_STORE=postgres)',
  sql: `
CREATE TABLE memory_tenants (
  tenant       text COLLATE "C" NOT NULL,
  incarnation  text NOT NULL DEFAULT gen_random_uuid()::text,
  next         bigint NOT NULL DEFAULT 0,
  deletions    bigint NOT NULL DEFAULT 0,
  docs         bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant)
);

CREATE TABLE memory_entries (
  tenant      text COLLATE "C" NOT NULL,
  label       bigint NOT NULL,
  id          text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C",
  len         integer NOT NULL,
  record      json NOT NULL,
  PRIMARY KEY (tenant, label)
);
CREATE UNIQUE INDEX memory_entries_by_id ON memory_entries (tenant, id);
CREATE INDEX memory_entries_by_session ON memory_entries (tenant, session_id, label) WHERE session_id IS NOT NULL;

CREATE TABLE memory_postings (
  tenant    text COLLATE "C" NOT NULL,
  first     bigint NOT NULL,
  postings  bytea NOT NULL,
  PRIMARY KEY (tenant, first)
);

CREATE TABLE memory_deletions (
  tenant  text COLLATE "C" NOT NULL,
  seq     bigint NOT NULL,
  label   bigint NOT NULL,
  PRIMARY KEY (tenant, seq)
);

CREATE TABLE memory_deleted_sessions (
  tenant      text COLLATE "C" NOT NULL,
  session_id  text COLLATE "C" NOT NULL,
  deleted_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, session_id)
);
`,
}
