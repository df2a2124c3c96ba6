//! Streaming `<think>…</think>` / `<reasoning>…</reasoning>` splitter.
//!
//! Some models put their chain of thought inline in the content, wrapped in one of these
//! tags. [`ThinkSplitter`] receives content deltas in any chunking and emits [`Piece`]s:
//! visible [`Piece::Content`] and [`Piece::Reasoning`], with the tags themselves removed.
//!
//! A tag can arrive split across deltas (`"<thi"` + `"nk>"`), so the splitter always
//! holds back the last [`HOLD_BACK`] characters (the length of the longest tag,
//! `</reasoning>`) until more text arrives, [`ThinkSplitter::flush`] is called (the
//! OpenAI adapter does so when a tool-call delta arrives) or the stream ends
//! ([`ThinkSplitter::finish`]). This matches the original server, which emitted
//! `"Le"` and then `"t me run it."` for the single delta `"Let me run it."`.
//!
//! The output is independent of the chunking as long as `flush` is only called at the end:
//! the concatenated pieces always equal the input minus the recognised tags.

/// Characters held back so that a tag split across deltas is still recognised.
pub const HOLD_BACK: usize = "</reasoning>".len();

/// Opening tags and the closing tag each one expects.
const TAGS: [(&str, &str); 2] = [("<think>", "</think>"), ("<reasoning>", "</reasoning>")];

/// One classified stretch of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Content(String),
    Reasoning(String),
}

impl Piece {
    /// The text of the piece, whatever its kind.
    pub fn text(&self) -> &str {
        match self {
            Self::Content(t) | Self::Reasoning(t) => t,
        }
    }

    fn is_reasoning(&self) -> bool {
        matches!(self, Self::Reasoning(_))
    }
}

/// Incremental splitter; one per response.
#[derive(Debug, Default, Clone)]
pub struct ThinkSplitter {
    /// Text received but not yet emitted.
    buf: String,
    /// The closing tag we are waiting for while inside a reasoning span.
    closing: Option<&'static str>,
}

impl ThinkSplitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the splitter is currently inside a reasoning span.
    pub fn in_reasoning(&self) -> bool {
        self.closing.is_some()
    }

    /// Feeds one content delta; returns what can be emitted now (adjacent pieces of the same
    /// kind merged, empty pieces dropped).
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        self.buf.push_str(delta);
        let mut out = Vec::new();
        self.consume_tags(&mut out);
        // Hold back the last HOLD_BACK characters: a tag may be starting there.
        let keep_from = self
            .buf
            .char_indices()
            .rev()
            .nth(HOLD_BACK - 1)
            .map_or(0, |(i, _)| i);
        if keep_from > 0 {
            let rest = self.buf.split_off(keep_from);
            let ready = std::mem::replace(&mut self.buf, rest);
            self.emit(ready, &mut out);
        }
        out
    }

    /// Emits everything held back without ending the response (a tag split across this
    /// point is then no longer recognised).
    pub fn flush(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        self.consume_tags(&mut out);
        let ready = std::mem::take(&mut self.buf);
        self.emit(ready, &mut out);
        out
    }

    /// Ends the response: emits everything still held back. An unclosed reasoning span stays
    /// reasoning; the splitter is reset and can be reused.
    pub fn finish(&mut self) -> Vec<Piece> {
        let out = self.flush();
        self.closing = None;
        out
    }

    /// Splits off every complete tag currently in the buffer.
    fn consume_tags(&mut self, out: &mut Vec<Piece>) {
        loop {
            match self.closing {
                Some(close) => {
                    let Some(at) = self.buf.find(close) else {
                        return;
                    };
                    let before: String = self.buf.drain(..at + close.len()).collect();
                    self.emit(before[..at].to_string(), out);
                    self.closing = None;
                }
                None => {
                    let found = TAGS
                        .iter()
                        .filter_map(|(open, close)| {
                            self.buf.find(open).map(|at| (at, *open, *close))
                        })
                        .min_by_key(|(at, _, _)| *at);
                    let Some((at, open, close)) = found else {
                        return;
                    };
                    let before: String = self.buf.drain(..at + open.len()).collect();
                    self.emit(before[..at].to_string(), out);
                    self.closing = Some(close);
                }
            }
        }
    }

    /// Appends `text` in the current mode, merging with the previous piece of the same kind.
    fn emit(&self, text: String, out: &mut Vec<Piece>) {
        if text.is_empty() {
            return;
        }
        let reasoning = self.closing.is_some();
        if let Some(last) = out.last_mut()
            && last.is_reasoning() == reasoning
        {
            match last {
                Piece::Content(t) | Piece::Reasoning(t) => t.push_str(&text),
            }
            return;
        }
        out.push(if reasoning {
            Piece::Reasoning(text)
        } else {
            Piece::Content(text)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(chunks: &[&str]) -> Vec<Piece> {
        let mut s = ThinkSplitter::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(s.push(c));
        }
        out.extend(s.finish());
        merge(out)
    }

    fn merge(pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out: Vec<Piece> = Vec::new();
        for p in pieces {
            match (out.last_mut(), &p) {
                (Some(Piece::Content(a)), Piece::Content(b))
                | (Some(Piece::Reasoning(a)), Piece::Reasoning(b)) => a.push_str(b),
                _ => out.push(p),
            }
        }
        out
    }

    fn c(s: &str) -> Piece {
        Piece::Content(s.to_string())
    }
    fn r(s: &str) -> Piece {
        Piece::Reasoning(s.to_string())
    }

    #[test]
    fn plain_text_is_held_back_twelve_chars_like_the_original() {
        let mut s = ThinkSplitter::new();
        assert_eq!(s.push("Let me run it."), vec![c("Le")]);
        assert_eq!(s.finish(), vec![c("t me run it.")]);
    }

    #[test]
    fn short_text_is_emitted_only_at_finish() {
        let mut s = ThinkSplitter::new();
        assert!(s.push("hi").is_empty());
        assert_eq!(s.finish(), vec![c("hi")]);
    }

    #[test]
    fn think_span_in_one_chunk() {
        assert_eq!(
            run(&["<think>plan</think>answer"]),
            vec![r("plan"), c("answer")]
        );
    }

    #[test]
    fn reasoning_span_with_tags_split_everywhere() {
        let text = "before<reasoning>deep thought</reasoning>after";
        let chunks: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        assert_eq!(run(&refs), vec![c("before"), r("deep thought"), c("after")]);
    }

    #[test]
    fn closing_tag_must_match_the_opening_one() {
        assert_eq!(
            run(&["<think>a</reasoning>b</think>c"]),
            vec![r("a</reasoning>b"), c("c")]
        );
    }

    #[test]
    fn unclosed_span_stays_reasoning_and_stray_close_is_content() {
        assert_eq!(
            run(&["x</think>y<think>never closed"]),
            vec![c("x</think>y"), r("never closed")]
        );
    }

    #[test]
    fn flush_releases_held_text() {
        let mut s = ThinkSplitter::new();
        assert!(s.push("<think>abc").is_empty());
        assert!(s.in_reasoning());
        assert_eq!(s.flush(), vec![r("abc")]);
        assert_eq!(s.push("</think>done"), Vec::<Piece>::new());
        assert_eq!(s.finish(), vec![c("done")]);
        assert!(!s.in_reasoning());
    }

    #[test]
    fn multibyte_text_is_split_on_char_boundaries() {
        let text = "日本語のテキストです、とても長い文章<think>考え</think>答え";
        let mut s = ThinkSplitter::new();
        let mut out = s.push(text);
        out.extend(s.finish());
        assert_eq!(
            merge(out),
            vec![
                c("日本語のテキストです、とても長い文章"),
                r("考え"),
                c("答え")
            ]
        );
    }

    /// Reference: the whole text split in one go, written independently of the streaming code.
    fn reference(text: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut rest = text;
        loop {
            let next = ["<think>", "<reasoning>"]
                .iter()
                .filter_map(|t| rest.find(t).map(|i| (i, *t)))
                .min();
            let Some((i, open)) = next else {
                out.push(c(rest));
                break;
            };
            out.push(c(&rest[..i]));
            rest = &rest[i + open.len()..];
            let close = if open == "<think>" {
                "</think>"
            } else {
                "</reasoning>"
            };
            match rest.find(close) {
                Some(j) => {
                    out.push(r(&rest[..j]));
                    rest = &rest[j + close.len()..];
                }
                None => {
                    out.push(r(rest));
                    break;
                }
            }
        }
        merge(out.into_iter().filter(|p| !p.text().is_empty()).collect())
    }

    fn text_strategy() -> impl Strategy<Value = String> {
        let atoms = prop::sample::select(vec![
            "a",
            "b",
            " ",
            "\n",
            "<",
            ">",
            "/",
            "é",
            "日",
            "<think>",
            "</think>",
            "<reasoning>",
            "</reasoning>",
            "<thi",
            "nk>",
            "</reas",
            "oning>",
            "<think",
            "</",
        ]);
        prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
    }

    fn chunk(text: &str, cuts: &[usize]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
        points.push(0);
        points.push(chars.len());
        points.sort_unstable();
        points.dedup();
        points
            .windows(2)
            .map(|w| chars[w[0]..w[1]].iter().collect())
            .collect()
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_reference_split(
            text in text_strategy(),
            cuts in prop::collection::vec(any::<usize>(), 0..20),
        ) {
            let chunks = chunk(&text, &cuts);
            let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
            let streamed = run(&refs);
            let whole = run(&[text.as_str()]);
            prop_assert_eq!(&streamed, &whole);
            prop_assert_eq!(&streamed, &reference(&text));
            let joined: String = streamed.iter().map(Piece::text).collect();
            let mut stripped = String::new();
            for p in reference(&text) { stripped.push_str(p.text()); }
            prop_assert_eq!(joined, stripped);
        }

        #[test]
        fn without_tags_everything_is_content(text in "[a-z <>/é]{0,60}", cuts in prop::collection::vec(any::<usize>(), 0..10)) {
            prop_assume!(!text.contains("<think>") && !text.contains("<reasoning>"));
            let chunks = chunk(&text, &cuts);
            let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
            let out = run(&refs);
            let joined: String = out.iter().map(Piece::text).collect();
            prop_assert!(out.iter().all(|p| !p.is_reasoning()));
            prop_assert_eq!(joined, text);
        }
    }
}
