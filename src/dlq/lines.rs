//! Reading an export line by line with a cap on one line's length, in flat memory.
//!
//! A line is gathered only up to the cap ([`DEFAULT_MAX_LINE_BYTES`] unless the reader is told
//! otherwise); past it the rest of the line is skipped in the reader's own buffer-sized chunks
//! up to the next line end, and the line is reported as [`Content::TooLong`] with its number and
//! length. The chunks of such a line can be handed to a sink on the way (`dlq purge` keeps the
//! lines it cannot read, byte for byte, without holding them).

use std::io::{self, BufRead};

/// The default cap on one line of an export, in bytes (16 MiB): far above any dead letter a
/// broker accepts, far below what hurts.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// What a line holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Content<'a> {
    /// The line, without its line end.
    Text(&'a [u8]),
    /// The line was longer than the cap: skipped, `bytes` long (without its line end).
    TooLong {
        /// Its length.
        bytes: u64,
    },
}

/// One line of the input.
#[derive(Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based.
    pub number: u64,
    pub content: Content<'a>,
    /// The line ended with `\n` (the last line of a file may not).
    pub newline: bool,
}

/// Lines of a [`BufRead`], each at most `max` bytes long.
pub struct LineReader<R> {
    reader: R,
    max: usize,
    /// A line that crosses the end of the reader's buffer, gathered (up to `max`).
    partial: Vec<u8>,
    /// Bytes of the reader's buffer the line returned last still borrows.
    pending: usize,
    number: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Reads `reader`, refusing lines longer than `max` bytes (at least 1).
    pub fn new(reader: R, max: usize) -> Self {
        LineReader {
            reader,
            max: max.max(1),
            partial: Vec::new(),
            pending: 0,
            number: 0,
        }
    }

    /// The cap on one line, in bytes.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The number of the last line returned (0 before the first).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The next line, `None` at the end of the input.
    ///
    /// # Errors
    /// Reading failed.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.next_line_forwarding_overflow(|_| Ok(()))
    }

    /// [`next_line`](Self::next_line), handing each chunk of a line over the cap to `overflow`
    /// as it is skipped (the whole line in order, without its line end).
    ///
    /// # Errors
    /// Reading failed, or `overflow` failed.
    pub fn next_line_forwarding_overflow(
        &mut self,
        overflow: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<Option<Line<'_>>> {
        self.reader.consume(std::mem::take(&mut self.pending));
        self.partial.clear();
        if self.partial.capacity() > 1 << 20 {
            // One long line must not keep its buffer for the rest of the input.
            self.partial = Vec::new();
        }
        loop {
            // Look first, borrow again to return: a borrow returned from inside the loop would
            // hold the reader for the rest of it.
            let (len, end) = {
                let buf = self.reader.fill_buf()?;
                (buf.len(), memchr::memchr(b'\n', buf))
            };
            if len == 0 {
                if self.partial.is_empty() {
                    return Ok(None);
                }
                self.number += 1;
                return Ok(Some(Line {
                    number: self.number,
                    content: Content::Text(&self.partial),
                    newline: false,
                }));
            }
            if self.partial.len() + end.unwrap_or(len) > self.max {
                return self.skip(overflow).map(Some);
            }
            match end {
                Some(end) if self.partial.is_empty() => {
                    self.number += 1;
                    self.pending = end + 1;
                    // Nothing was consumed: the same buffer.
                    let buf = self.reader.fill_buf()?;
                    return Ok(Some(Line {
                        number: self.number,
                        content: Content::Text(&buf[..end]),
                        newline: true,
                    }));
                }
                Some(end) => {
                    let buf = self.reader.fill_buf()?;
                    self.partial.extend_from_slice(&buf[..end]);
                    self.reader.consume(end + 1);
                    self.number += 1;
                    return Ok(Some(Line {
                        number: self.number,
                        content: Content::Text(&self.partial),
                        newline: true,
                    }));
                }
                None => {
                    let buf = self.reader.fill_buf()?;
                    self.partial.extend_from_slice(buf);
                    self.reader.consume(len);
                }
            }
        }
    }

    /// The line being read is over the cap: hand what was gathered and the rest of the line to
    /// `overflow`, chunk by chunk, up to the line end.
    fn skip(
        &mut self,
        mut overflow: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<Line<'static>> {
        let mut bytes = self.partial.len() as u64;
        overflow(&self.partial)?;
        self.partial = Vec::new();
        let newline = loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                break false;
            }
            match memchr::memchr(b'\n', buf) {
                Some(end) => {
                    overflow(&buf[..end])?;
                    bytes += end as u64;
                    self.reader.consume(end + 1);
                    break true;
                }
                None => {
                    let n = buf.len();
                    overflow(buf)?;
                    bytes += n as u64;
                    self.reader.consume(n);
                }
            }
        };
        self.number += 1;
        Ok(Line {
            number: self.number,
            content: Content::TooLong { bytes },
            newline,
        })
    }
}

/// "line is 20000000 bytes, over the cap of 16777216 (--max-line-bytes)".
pub fn too_long_message(bytes: u64, max: usize) -> String {
    format!(
        "the line is {bytes} bytes, over the cap of {max} bytes on one line (--max-line-bytes \
         raises it)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn read_all(
        text: &[u8],
        max: usize,
        capacity: usize,
    ) -> Vec<(u64, Result<Vec<u8>, u64>, bool)> {
        let mut r = LineReader::new(io::BufReader::with_capacity(capacity, text), max);
        let mut out = Vec::new();
        while let Some(line) = r.next_line().unwrap() {
            let content = match line.content {
                Content::Text(t) => Ok(t.to_vec()),
                Content::TooLong { bytes } => Err(bytes),
            };
            out.push((line.number, content, line.newline));
        }
        out
    }

    #[test]
    fn lines_within_the_cap_read_as_they_are() {
        for capacity in [1, 2, 3, 7, 64] {
            let got = read_all(b"ab\n\ncdef\ng", 4, capacity);
            assert_eq!(
                got,
                vec![
                    (1, Ok(b"ab".to_vec()), true),
                    (2, Ok(Vec::new()), true),
                    (3, Ok(b"cdef".to_vec()), true),
                    (4, Ok(b"g".to_vec()), false),
                ],
                "buffer of {capacity}"
            );
        }
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_with_its_number_and_length() {
        for capacity in [1, 3, 5, 64] {
            let got = read_all(b"ab\nabcdefgh\ncd\nxxxxxx", 4, capacity);
            assert_eq!(
                got,
                vec![
                    (1, Ok(b"ab".to_vec()), true),
                    (2, Err(8), true),
                    (3, Ok(b"cd".to_vec()), true),
                    (4, Err(6), false),
                ],
                "buffer of {capacity}"
            );
        }
    }

    #[test]
    fn the_overflow_sink_gets_the_whole_line_in_order() {
        let text = b"ok\n0123456789abcdef\nok\n";
        let mut r = LineReader::new(io::BufReader::with_capacity(3, &text[..]), 5);
        let mut kept = Vec::new();
        let mut lines = 0;
        loop {
            let mut sink = Vec::new();
            let Some(line) = r
                .next_line_forwarding_overflow(|chunk| {
                    sink.extend_from_slice(chunk);
                    Ok(())
                })
                .unwrap()
            else {
                break;
            };
            lines += 1;
            if let Content::TooLong { bytes } = line.content {
                assert_eq!(bytes, 16);
                kept = sink;
            }
        }
        assert_eq!(lines, 3);
        assert_eq!(kept, b"0123456789abcdef");
    }

    /// Memory stays flat: a 64 MiB line with a 1 KiB cap never grows the gathered line past it.
    #[test]
    fn a_huge_line_is_never_held() {
        let mut r = LineReader::new(io::BufReader::new(io::repeat(b'x').take(64 << 20)), 1024);
        let line = r.next_line().unwrap().unwrap();
        assert_eq!(line.content, Content::TooLong { bytes: 64 << 20 });
        assert!(r.partial.capacity() <= 1024 + (8 << 10));
        assert!(r.next_line().unwrap().is_none());
    }
}
