//! The embedded fonts and measuring text set in them: widths, wrapping, fitting and cutting
//! with "…", and the glyphs each character is drawn with.

use std::sync::OnceLock;

use krilla::text::{Font, GlyphId, KrillaGlyph};
use skrifa::charmap::Charmap;
use skrifa::instance::{LocationRef, Size};
use skrifa::metrics::GlyphMetrics;
use skrifa::{FontRef, MetadataProvider};

pub(super) static REGULAR_TTF: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
pub(super) static BOLD_TTF: &[u8] = include_bytes!("../assets/DejaVuSans-Bold.ttf");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    Regular,
    Bold,
}

pub(super) struct Face {
    pub(super) font: Font,
    pub(super) charmap: Charmap<'static>,
    /// Advances in em (at size 1).
    pub(super) metrics: GlyphMetrics<'static>,
}

pub(super) struct Faces {
    pub(super) regular: Face,
    pub(super) bold: Face,
}

impl Face {
    pub(super) fn load(bytes: &'static [u8], name: &str) -> Result<Face, String> {
        let font = Font::new(krilla::Data::from(bytes), 0)
            .ok_or_else(|| format!("cannot read the embedded font {name}"))?;
        let font_ref = FontRef::new(bytes)
            .map_err(|e| format!("cannot read the embedded font {name}: {e}"))?;
        Ok(Face {
            font,
            charmap: font_ref.charmap(),
            metrics: font_ref.glyph_metrics(Size::new(1.0), LocationRef::default()),
        })
    }

    pub(super) fn has(&self, c: char) -> bool {
        self.charmap.map(c).is_some()
    }

    /// The glyph for `c` (the font's "missing" box if it has none) and its advance in em.
    pub(super) fn glyph(&self, c: char) -> (skrifa::GlyphId, f32) {
        let id = self.charmap.map(c).unwrap_or(skrifa::GlyphId::NOTDEF);
        let advance = self.metrics.advance_width(id).unwrap_or(0.0);
        (id, if advance.is_finite() { advance } else { 0.0 })
    }

    pub(super) fn shape(&self, text: &str) -> Vec<KrillaGlyph> {
        text.char_indices()
            .map(|(at, c)| {
                let (id, advance) = self.glyph(c);
                KrillaGlyph::new(
                    GlyphId::new(id.to_u32()),
                    advance,
                    0.0,
                    0.0,
                    0.0,
                    at..at + c.len_utf8(),
                    None,
                )
            })
            .collect()
    }

    pub(super) fn width(&self, text: &str, size: f32) -> f32 {
        text.chars().map(|c| self.glyph(c).1).sum::<f32>() * size
    }
}

impl Faces {
    pub(super) fn get(&self, style: Style) -> &Face {
        match style {
            Style::Regular => &self.regular,
            Style::Bold => &self.bold,
        }
    }

    pub(super) fn width(&self, text: &str, style: Style, size: f32) -> f32 {
        self.get(style).width(text, size)
    }

    /// `text` cut to fit `max_w`, ending with "…" if it was cut.
    pub(super) fn ellipsize(&self, text: &str, style: Style, size: f32, max_w: f32) -> String {
        if self.width(text, style, size) <= max_w {
            return text.to_owned();
        }
        let face = self.get(style);
        let budget = max_w - face.width(ELLIPSIS, size);
        let mut out = String::new();
        let mut w = 0.0;
        for c in text.chars() {
            let cw = face.glyph(c).1 * size;
            if w + cw > budget {
                break;
            }
            w += cw;
            out.push(c);
        }
        let mut out = out.trim_end().to_owned();
        if w + face.width(ELLIPSIS, size) <= max_w {
            out.push_str(ELLIPSIS);
        }
        out
    }

    /// `line` marked as cut ("…" at its end), still no wider than `max_w`.
    pub(super) fn cut_here(&self, line: &str, style: Style, size: f32, max_w: f32) -> String {
        if line.ends_with(ELLIPSIS) {
            return line.to_owned();
        }
        self.ellipsize(&format!("{line}{ELLIPSIS}"), style, size, max_w)
    }

    /// The size (at most `size`, at least 70% of it) at which `text` fits `max_w`, and the
    /// text, cut with "…" if it does not fit even then.
    pub(super) fn fit(&self, text: &str, style: Style, size: f32, max_w: f32) -> (String, f32) {
        let w = self.width(text, style, size);
        if w <= max_w {
            return (text.to_owned(), size);
        }
        let smaller = size * max_w / w;
        if smaller >= size * 0.7 {
            // A hair smaller, so that rounding never puts it past the edge.
            return (text.to_owned(), smaller * 0.999);
        }
        let smallest = size * 0.7;
        (self.ellipsize(text, style, smallest, max_w), smallest)
    }

    /// `text` broken into lines no wider than `max_w`: at spaces, inside a word only when
    /// the word alone is too wide; "\n" starts a new line. At most `max_lines`, the last cut
    /// with "…" if there was more.
    pub(super) fn wrap(
        &self,
        text: &str,
        style: Style,
        size: f32,
        max_w: f32,
        max_lines: usize,
    ) -> Vec<String> {
        let face = self.get(style);
        let space = face.width(" ", size);
        let mut lines: Vec<String> = Vec::new();
        let mut more = false;
        'paragraphs: for paragraph in text.split('\n') {
            let mut line = String::new();
            let mut line_w = 0.0;
            for word in paragraph.split_whitespace() {
                if lines.len() >= max_lines {
                    more = true;
                    break 'paragraphs;
                }
                let word_w = face.width(word, size);
                if !line.is_empty() && line_w + space + word_w <= max_w {
                    line.push(' ');
                    line.push_str(word);
                    line_w += space + word_w;
                    continue;
                }
                if !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                    line_w = 0.0;
                }
                if word_w <= max_w {
                    line.push_str(word);
                    line_w = word_w;
                    continue;
                }
                // A word wider than the line: break it anywhere.
                for c in word.chars() {
                    let cw = face.glyph(c).1 * size;
                    if !line.is_empty() && line_w + cw > max_w {
                        lines.push(std::mem::take(&mut line));
                        line_w = 0.0;
                        if lines.len() >= max_lines {
                            more = true;
                            break 'paragraphs;
                        }
                    }
                    line.push(c);
                    line_w += cw;
                }
            }
            if lines.len() >= max_lines {
                more = more || !line.is_empty();
                break;
            }
            lines.push(line);
        }
        // Blank lines at the end say nothing.
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        if lines.len() > max_lines {
            lines.truncate(max_lines);
            more = true;
        }
        if more {
            if let Some(last) = lines.last_mut() {
                *last = self.cut_here(last, style, size, max_w);
            }
        }
        lines
    }
}

pub(super) static FACES: OnceLock<Result<Faces, String>> = OnceLock::new();

pub(super) fn faces() -> Result<&'static Faces, String> {
    FACES
        .get_or_init(|| {
            Ok(Faces {
                regular: Face::load(REGULAR_TTF, "DejaVuSans.ttf")?,
                bold: Face::load(BOLD_TTF, "DejaVuSans-Bold.ttf")?,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

pub(super) const ELLIPSIS: &str = "…";

/// Text from outside as one line: control characters (newlines included) become spaces,
/// runs of whitespace one space.
pub(super) fn clean_line(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text from outside that may have lines (memo, footer, reason): "\r\n" and "\r" become
/// "\n", tabs spaces, other control characters go. Capped, so that a huge memo costs
/// nothing (what is drawn is capped by lines anyway).
pub(super) fn clean_text(text: &str) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .take(20_000)
        .filter_map(|c| match c {
            '\r' | '\n' => Some('\n'),
            c if c.is_control() => c.is_whitespace().then_some(' '),
            c => Some(c),
        })
        .collect()
}
