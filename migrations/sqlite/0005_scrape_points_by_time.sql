-- Scrape samples keyed by time within each migration's source: (migration, source, at, series)
-- instead of (migration, source, series, at). A tick reads what was stored after an instant and
-- prunes what is older than the retention; keyed by series first, both statements walked every
-- sample of the source's whole retention (up to 20 minutes of scrapes), so a tick grew with the
-- age of the history. Keyed by time, both seek to their instant and read or delete only their
-- rows, and a round's samples of one source go side by side at the end of its range. WITHOUT
-- ROWID: the key is the table, one b-tree per sample written instead of the table and its key.
CREATE TABLE scrape_points_by_time (
    migration TEXT NOT NULL,
    source    TEXT NOT NULL,
    series    TEXT NOT NULL,
    metric    TEXT NOT NULL,
    labels    TEXT NOT NULL,
    at        INTEGER NOT NULL,
    value     REAL NOT NULL,
    PRIMARY KEY (migration, source, at, series)
) WITHOUT ROWID;

INSERT INTO scrape_points_by_time (migration, source, series, metric, labels, at, value)
SELECT migration, source, series, metric, labels, at, value FROM scrape_points;

DROP TABLE scrape_points;
ALTER TABLE scrape_points_by_time RENAME TO scrape_points;
