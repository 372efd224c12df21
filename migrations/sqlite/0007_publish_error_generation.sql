-- The generation whose publication failed, beside the error: a slow failing publication of an
-- older generation must not note its error over a newer generation published since, and a
-- publication of an older generation must not clear the error of a newer one. NULL for errors
-- noted before this column (any publication clears them).
ALTER TABLE migrations ADD COLUMN publish_error_generation INTEGER;
