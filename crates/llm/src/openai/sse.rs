//! A minimal Server-Sent Events decoder: bytes in, `data` payloads out.
//!
//! Only `data:` fields matter for chat completions; `event:`, `id:`, `retry:` and comment
//! lines (keep-alives such as `: ping`) are ignored. Lines may end in `\n`, `\r\n` or `\r`
//! and may be split anywhere across chunks. An event is dispatched at a blank line, or at
//! the end of the body if the server forgot the final blank line.

/// Incremental SSE decoder; one per response body.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// Bytes of the current, incomplete line.
    line: Vec<u8>,
    /// The previous byte was `\r` (a following `\n` belongs to the same line ending).
    after_cr: bool,
    /// `data` lines of the event being built.
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data payloads of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// End of body: returns the last event if it was not terminated by a blank line.
    pub fn finish(&mut self) -> Option<String> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        self.end_line(&mut out);
        out.pop()
    }

    fn end_line(&mut self, out: &mut Vec<String>) {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(data);
            }
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_events_and_ignores_comments_and_other_fields() {
        let mut d = SseDecoder::default();
        let mut out = d.push(b": keep-alive\n\nevent: x\nid: 1\ndata: {\"a\":1}\n\ndata: [DO");
        out.extend(d.push(b"NE]\r\n\r\n"));
        assert_eq!(out, vec!["{\"a\":1}".to_string(), "[DONE]".to_string()]);
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn multi_line_data_and_cr_only_line_endings() {
        let mut d = SseDecoder::default();
        let out = d.push(b"data: a\rdata:b\r\rdata: c\r");
        assert_eq!(out, vec!["a\nb".to_string()]);
        assert_eq!(d.finish(), Some("c".to_string()));
    }

    #[test]
    fn byte_by_byte_gives_the_same_result() {
        let body = "data: {\"x\":\"é\"}\r\n\r\n: ping\n\ndata: [DONE]\n\n";
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for b in body.as_bytes() {
            out.extend(d.push(&[*b]));
        }
        assert_eq!(out, vec!["{\"x\":\"é\"}".to_string(), "[DONE]".to_string()]);
    }

    #[test]
    fn unterminated_last_event_is_flushed_at_finish() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: tail").is_empty());
        assert_eq!(d.finish(), Some("tail".to_string()));
    }
}
