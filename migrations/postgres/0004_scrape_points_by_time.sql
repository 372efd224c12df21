-- Scrape samples keyed by time within each migration's source: (migration, source, at, series)
-- instead of (migration, source, series, at). A tick reads what was stored after an instant and
-- prunes what is older than the retention; keyed by series first, both statements walked every
-- sample of the source's whole retention (up to 20 minutes of scrapes), so a tick grew with the
-- age of the history. Keyed by time, both seek to their instant and read or delete only their
-- rows. The columns are the same, so `ON CONFLICT (migration, source, series, at)` still names
-- this key (a conflict target is matched without regard to column order).
ALTER TABLE scrape_points DROP CONSTRAINT scrape_points_pkey;
ALTER TABLE scrape_points ADD PRIMARY KEY (migration, source, at, series);
