//! Head + tail truncation of tool output (node spec §4.4).

/// Cuts `text` to about `limit` characters: when it is longer, the first and last `limit / 2`
/// characters are kept, joined by a marker line surrounded by blank lines:
/// `... [<omitted> chars truncated — output exceeded <limit> char limit] ...`.
/// Characters are Unicode scalar values, so cuts never split a UTF-8 sequence.
/// `limit == 0` means no limit.
pub fn truncate_output(text: &str, limit: usize) -> String {
    if limit == 0 {
        return text.to_owned();
    }
    let total = text.chars().count();
    if total <= limit {
        return text.to_owned();
    }
    let half = limit / 2;
    let head_end = byte_index_of_char(text, half);
    let tail_start = byte_index_of_char(text, total - half);
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 80);
    out.push_str(&text[..head_end]);
    out.push_str(&marker(total - 2 * half, limit));
    out.push_str(&text[tail_start..]);
    out
}

fn marker(omitted: usize, limit: usize) -> String {
    format!("\n\n... [{omitted} chars truncated — output exceeded {limit} char limit] ...\n\n")
}

/// Byte offset of the `n`th character (or the end of the string).
fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Collects streamed text in bounded memory, producing exactly what [`truncate_output`]
/// would produce for the whole stream with the same limit.
#[derive(Debug)]
pub(crate) struct BoundedText {
    limit: usize,
    /// The first `limit` characters (all of them when `limit == 0`).
    head: String,
    head_chars: usize,
    /// The most recent characters after `head`, trimmed to at least `limit / 2` when long.
    tail: String,
    tail_chars: usize,
    total: usize,
}

impl BoundedText {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            head: String::new(),
            head_chars: 0,
            tail: String::new(),
            tail_chars: 0,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, text: &str) {
        let n = text.chars().count();
        self.total += n;
        if self.limit == 0 {
            self.head.push_str(text);
            return;
        }
        let room = self.limit - self.head_chars;
        let (to_head, to_tail) = if n <= room {
            (text, "")
        } else {
            text.split_at(byte_index_of_char(text, room))
        };
        let head_n = n.min(room);
        self.head.push_str(to_head);
        self.head_chars += head_n;
        if !to_tail.is_empty() {
            self.tail.push_str(to_tail);
            self.tail_chars += n - head_n;
            let keep = self.limit / 2;
            if self.tail_chars > 2 * keep.max(1024) {
                let cut = byte_index_of_char(&self.tail, self.tail_chars - keep);
                self.tail.drain(..cut);
                self.tail_chars = keep;
            }
        }
    }

    pub(crate) fn finish(self) -> String {
        if self.limit == 0 || self.total <= self.limit {
            let mut s = self.head;
            s.push_str(&self.tail);
            return s;
        }
        let half = self.limit / 2;
        let head_end = byte_index_of_char(&self.head, half);
        // The kept tail may reach back into `head` when the stream is only a little over.
        let mut rest = String::from(&self.head[head_end..]);
        rest.push_str(&self.tail);
        let rest_chars = self.head_chars - half + self.tail_chars;
        let tail_start = byte_index_of_char(&rest, rest_chars - half);
        let mut out = String::from(&self.head[..head_end]);
        out.push_str(&marker(self.total - 2 * half, self.limit));
        out.push_str(&rest[tail_start..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_and_zero_limit_are_unchanged() {
        assert_eq!(truncate_output("hello", 5), "hello");
        assert_eq!(truncate_output("hello", 0), "hello");
        assert_eq!(truncate_output("", 3), "");
    }

    #[test]
    fn long_text_keeps_head_and_tail_with_marker() {
        let text = "a".repeat(10) + &"b".repeat(80) + &"c".repeat(10);
        let out = truncate_output(&text, 20);
        assert_eq!(
            out,
            format!(
                "{}\n\n... [80 chars truncated — output exceeded 20 char limit] ...\n\n{}",
                "a".repeat(10),
                "c".repeat(10)
            )
        );
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let text = "é".repeat(50) + &"日".repeat(50);
        let out = truncate_output(&text, 11);
        assert!(out.starts_with(&"é".repeat(5)));
        assert!(out.ends_with(&"日".repeat(5)));
        assert!(out.contains("[90 chars truncated — output exceeded 11 char limit]"));
    }

    #[test]
    fn bounded_collector_matches_truncate_output_for_any_chunking() {
        let text: String = (0..3000)
            .map(|i| char::from_u32(0x61 + (i % 26)).unwrap())
            .collect();
        let text = text.replace('q', "ü");
        for limit in [0, 1, 2, 7, 100, 2999, 3000, 3001, 5000] {
            for chunk in [1, 3, 64, 1000, 4000] {
                let mut b = BoundedText::new(limit);
                let chars: Vec<char> = text.chars().collect();
                for piece in chars.chunks(chunk) {
                    b.push(&piece.iter().collect::<String>());
                }
                assert_eq!(
                    b.finish(),
                    truncate_output(&text, limit),
                    "limit {limit} chunk {chunk}"
                );
            }
        }
    }
}
