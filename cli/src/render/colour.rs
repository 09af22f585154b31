//! Colour on a terminal: output whose words of judgement (the gate's `REGRESSION`, `pass`)
//! are marked with a tone while it is built, written in colour only when stdout is a
//! terminal and `NO_COLOR` is not set ([`crate::Global`] decides), plain otherwise. Only
//! gapscope's own escape sequences reach the terminal: every piece of text is made
//! [`super::terminal_safe`] first.

use std::ops::Range;

use gapscope_analyzer::gate::Verdict;

/// How a marked word reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// A failure: bold red.
    Bad,
    /// A success: green.
    Good,
    /// Neither, or not known: yellow.
    Unsure,
}

impl Tone {
    /// The tone of a gate verdict.
    pub fn of(v: Verdict) -> Self {
        match v {
            Verdict::Regression => Tone::Bad,
            Verdict::Pass | Verdict::Improvement => Tone::Good,
            Verdict::Inconclusive | Verdict::Incomparable => Tone::Unsure,
        }
    }

    fn sgr(self) -> &'static str {
        match self {
            Tone::Bad => "\u{1b}[1;31m",
            Tone::Good => "\u{1b}[32m",
            Tone::Unsure => "\u{1b}[33m",
        }
    }
}

/// Text with some spans marked with a tone.
#[derive(Debug, Default)]
pub struct Toned {
    text: String,
    spans: Vec<(Range<usize>, Tone)>,
}

impl From<String> for Toned {
    fn from(text: String) -> Self {
        Self {
            text,
            spans: Vec::new(),
        }
    }
}

impl Toned {
    pub fn push_str(&mut self, s: &str) {
        self.text.push_str(s);
    }

    pub fn push(&mut self, c: char) {
        self.text.push(c);
    }

    /// Appends `s` marked with `tone`.
    pub fn push_toned(&mut self, s: &str, tone: Tone) {
        let at = self.text.len();
        self.text.push_str(s);
        self.spans.push((at..self.text.len(), tone));
    }

    /// Appends a verdict's word in its tone, padded with spaces to `width` characters.
    pub fn push_verdict(&mut self, v: Verdict, width: usize) {
        let word = v.to_string();
        self.push_toned(&word, Tone::of(v));
        let n = word.chars().count();
        self.text.push_str(&" ".repeat(width.saturating_sub(n)));
    }

    /// Appends `other`, its tones kept.
    pub fn append(&mut self, other: Toned) {
        let at = self.text.len();
        self.text.push_str(&other.text);
        self.spans.extend(
            other
                .spans
                .into_iter()
                .map(|(r, t)| (r.start + at..r.end + at, t)),
        );
    }

    /// The text without colour.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text for a terminal: every piece made terminal-safe, the marked spans wrapped in
    /// their colour and a reset.
    pub fn to_ansi(&self) -> String {
        let mut out = String::with_capacity(self.text.len() + 16 * self.spans.len());
        let mut at = 0;
        for (r, tone) in &self.spans {
            out.push_str(&super::terminal_safe(&self.text[at..r.start]));
            out.push_str(tone.sgr());
            out.push_str(&super::terminal_safe(&self.text[r.clone()]));
            out.push_str("\u{1b}[0m");
            at = r.end;
        }
        out.push_str(&super::terminal_safe(&self.text[at..]));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_words_get_colour_and_input_stays_escaped() {
        let mut t = Toned::from("gate: ".to_owned());
        t.push_verdict(Verdict::Regression, 13);
        t.push_str("x\u{1b}[2Jy\n");
        let mut tail = Toned::default();
        tail.push_str("gemv ");
        tail.push_verdict(Verdict::Pass, 0);
        t.append(tail);
        assert_eq!(t.as_str(), "gate: REGRESSION   x\u{1b}[2Jy\ngemv pass");
        assert_eq!(
            t.to_ansi(),
            "gate: \u{1b}[1;31mREGRESSION\u{1b}[0m   x\\u001b[2Jy\ngemv \u{1b}[32mpass\u{1b}[0m"
        );
    }
}
