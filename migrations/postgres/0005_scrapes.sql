-- One row per scrape: (migration, source, at) and the samples it kept, as the JSON text
-- `[[bits, series, metric, labels], ...]` (the bits of the value as a signed 64-bit integer, so
-- that every double reads back exact). It replaces `scrape_times` (one row per instant) and
-- `scrape_points` (one row per sample): a round wrote a row per sample and a daemon starting
-- read one per sample, where both now touch a row per scrape. A scrape that kept no sample is a
-- row with `[]`. An instant that had samples but no row in `scrape_times` gets a row too.
CREATE TABLE scrapes (
    migration TEXT NOT NULL,
    source    TEXT NOT NULL,
    at        BIGINT NOT NULL,
    samples   TEXT NOT NULL,
    PRIMARY KEY (migration, source, at)
);

INSERT INTO scrapes (migration, source, at, samples)
SELECT k.migration, k.source, k.at,
       COALESCE((SELECT json_agg(json_build_array(
                            ('x' || encode(float8send(p.value), 'hex'))::bit(64)::bigint,
                            p.series, p.metric, p.labels))::text
                 FROM scrape_points p
                 WHERE p.migration = k.migration AND p.source = k.source AND p.at = k.at), '[]')
FROM (SELECT migration, source, at FROM scrape_times
      UNION SELECT migration, source, at FROM scrape_points) AS k;

DROP TABLE scrape_points;
DROP TABLE scrape_times;
