//! The one incremental Server-Sent Events decoder of both provider adapters.
//!
//! Yields one [`SseEvent`] (the `event:` name and the joined `data:` lines) per blank line;
//! comments (keep-alives such as `: ping`), `id:` and `retry:` are ignored. Lines may end in
//! `\n`, `\r\n` or `\r` and may be split anywhere across network reads. An event is also
//! dispatched at the end of the body if the server forgot the final blank line. The
//! OpenAI-compatible stream only reads `data`; the Anthropic stream also the `event` name.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field (empty when absent).
    pub event: String,
    pub data: String,
}

/// Incremental decoder; one per response body.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    line: Vec<u8>,
    after_cr: bool,
    event: String,
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
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

    /// End of body: the last event if it was not terminated by a blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        self.end_line(&mut out);
        out.pop()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if let Some(data) = self.data.take() {
                out.push(SseEvent { event, data });
            }
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn named_events_split_anywhere() {
        let body = "event: ping\ndata: {\"type\":\"ping\"}\n\n: c\n\nevent: message_stop\r\ndata: {}\r\n\r\n";
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for b in body.as_bytes() {
            out.extend(d.push(&[*b]));
        }
        assert_eq!(
            out,
            vec![ev("ping", "{\"type\":\"ping\"}"), ev("message_stop", "{}")]
        );
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn unterminated_event_is_flushed_and_name_resets() {
        let mut d = SseDecoder::default();
        assert_eq!(d.push(b"event: a\ndata: 1\n\ndata: 2"), vec![ev("a", "1")]);
        assert_eq!(d.finish(), Some(ev("", "2")));
    }

    #[test]
    fn splits_events_and_ignores_comments_and_other_fields() {
        let mut d = SseDecoder::default();
        let mut out = d.push(b": keep-alive\n\nevent: x\nid: 1\ndata: {\"a\":1}\n\ndata: [DO");
        out.extend(d.push(b"NE]\r\n\r\n"));
        assert_eq!(out, vec![ev("x", "{\"a\":1}"), ev("", "[DONE]")]);
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn multi_line_data_and_cr_only_line_endings() {
        let mut d = SseDecoder::default();
        let out = d.push(b"data: a\rdata:b\r\rdata: c\r");
        assert_eq!(out, vec![ev("", "a\nb")]);
        assert_eq!(d.finish(), Some(ev("", "c")));
    }

    #[test]
    fn byte_by_byte_gives_the_same_result() {
        let body = "data: {\"x\":\"é\"}\r\n\r\n: ping\n\ndata: [DONE]\n\n";
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for b in body.as_bytes() {
            out.extend(d.push(&[*b]));
        }
        assert_eq!(out, vec![ev("", "{\"x\":\"é\"}"), ev("", "[DONE]")]);
    }

    #[test]
    fn unterminated_last_event_is_flushed_at_finish() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: tail").is_empty());
        assert_eq!(d.finish(), Some(ev("", "tail")));
    }
}
