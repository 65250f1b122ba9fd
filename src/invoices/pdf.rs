//! An invoice or credit note as a PDF (A4): title and number, dates, seller and buyer, a
//! table of lines that flows onto further pages (its header repeated on each), totals by tax
//! rate, memo, footer and "Page 1 of 2" at the bottom of every page.
//!
//! Pure: no I/O, no database, no clock; the same [`Document`] always gives the same bytes.
//! The text is real text (searchable and extractable, not outlines), set in DejaVu Sans and
//! DejaVu Sans Bold, embedded in the binary (`assets/`, license in `assets/FONT-LICENSE.txt`)
//! and subset into each PDF, so Latin, Greek and Cyrillic names and the common currency
//! signs (€ £ ¥ ₹ ₽ $) print. Characters the font lacks (CJK, for one) print as an empty
//! box and do not reliably come back out of the text layer; right-to-left scripts (Arabic,
//! Hebrew) print unshaped, left to right.
//!
//! Text is laid out here, not by krilla's shaper: each character is one glyph advanced by
//! its width in the font (no kerning, no ligatures), so what is measured (to wrap, truncate
//! and right-align) is exactly what is drawn. Long texts wrap or are cut with "…"; amounts
//! too wide for their column are set smaller; nothing is drawn outside the margins.
//!
//! [`money`], [`percent`] and [`date`] are the formats the PDF uses, for the other places
//! that show the same numbers (emails, the hosted invoice page).

use std::sync::OnceLock;

use chrono::{Datelike, NaiveDate};
use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point};
use krilla::metadata::Metadata;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke};
use krilla::text::{Font, GlyphId, KrillaGlyph};
use skrifa::charmap::Charmap;
use skrifa::instance::{LocationRef, Size};
use skrifa::metrics::GlyphMetrics;
use skrifa::{FontRef, MetadataProvider};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Invoice,
    CreditNote,
}

#[derive(Debug, Clone, Default)]
pub struct Party {
    pub name: String,
    /// Address lines, already composed ("1 Main St", "75001 Paris", "FR").
    pub address: Vec<String>,
    pub email: Option<String>,
    pub tax_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub quantity: i64,
    /// Minor units.
    pub unit_amount: i64,
    pub tax_rate_bps: i64,
    pub tax_amount: i64,
    /// The line's amount before tax (net).
    pub net_amount: i64,
    /// Net + tax.
    pub total_amount: i64,
}

/// Net and tax of all lines at one rate.
#[derive(Debug, Clone)]
pub struct RateTotal {
    pub rate_bps: i64,
    pub net: i64,
    pub tax: i64,
}

#[derive(Debug, Clone)]
pub struct Document {
    pub kind: Kind,
    pub number: String,
    /// A credit note's original invoice number.
    pub original_number: Option<String>,
    pub issue_date: NaiveDate,
    pub due_date: Option<NaiveDate>,
    /// ISO 4217 code, e.g. "EUR", "JPY".
    pub currency: String,
    /// "en" (default), "de", "fr": number and date format only; labels stay English.
    pub locale: String,
    pub seller: Party,
    pub buyer: Party,
    pub lines: Vec<Line>,
    pub by_rate: Vec<RateTotal>,
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
    pub amount_paid: i64,
    pub amount_due: i64,
    pub memo: Option<String>,
    pub footer: Option<String>,
    /// A credit note's reason.
    pub reason: Option<String>,
}

/// The PDF's bytes.
pub fn render(doc: &Document) -> Result<Vec<u8>, String> {
    let faces = faces()?;
    let pages = layout(doc, faces);
    let mut pdf = krilla::Document::new();
    let title = format!("{} {}", kind_name(doc.kind), clean_line(&doc.number));
    pdf.set_metadata(Metadata::new().title(title.trim().to_owned()));
    for ops in &pages {
        let settings =
            PageSettings::from_wh(PAGE_W, PAGE_H).ok_or_else(|| "invalid page size".to_owned())?;
        let mut page = pdf.start_page_with(settings);
        let mut surface = page.surface();
        for op in ops {
            match op {
                Op::Text {
                    x,
                    y,
                    size,
                    style,
                    color,
                    text,
                } => {
                    let face = faces.get(*style);
                    let glyphs = face.shape(text);
                    surface.set_fill(Some(Fill {
                        paint: rgb_color(*color).into(),
                        ..Fill::default()
                    }));
                    surface.draw_glyphs(
                        Point::from_xy(*x, *y),
                        &glyphs,
                        face.font.clone(),
                        text,
                        *size,
                        false,
                    );
                }
                Op::Rule {
                    x1,
                    x2,
                    y,
                    width,
                    color,
                } => {
                    let mut builder = PathBuilder::new();
                    builder.move_to(*x1, *y);
                    builder.line_to(*x2, *y);
                    if let Some(path) = builder.finish() {
                        surface.set_fill(None);
                        surface.set_stroke(Some(Stroke {
                            paint: rgb_color(*color).into(),
                            width: *width,
                            ..Stroke::default()
                        }));
                        surface.draw_path(&path);
                        surface.set_stroke(None);
                    }
                }
            }
        }
        surface.finish();
        page.finish();
    }
    pdf.finish()
        .map_err(|e| format!("PDF rendering failed: {e}"))
}

/// An amount in minor units as the locale writes it, with the currency's symbol:
/// en: "€1,234.56", "¥1,235" (JPY has no minor unit; use iso_currency's exponent, default 2),
/// "-$5.00"; de: "1.234,56 €"; fr: "1 234,56 €" (a normal space is fine). Unknown locale → en.
/// Use iso_currency's `symbol()` (fall back to the code + space when the symbol is empty or the
/// same as the code).
///
/// Also written as the code: a symbol in a right-to-left script ("د.إ" for AED), which
/// cannot sit inside a left-to-right amount, and the generic "¤" iso_currency gives funds
/// and metals. An unknown code is written as given, with 2 decimals.
pub fn money(minor: i64, currency: &str, locale: &str) -> String {
    money_with(minor, currency, locale, |_| true)
}

/// A tax rate in basis points as a percentage: 2000 → "20%", 550 → "5.5%", 1925 → "19.25%"
/// (de/fr use a decimal comma).
pub fn percent(rate_bps: i64, locale: &str) -> String {
    let fmt = NumberFormat::of(locale);
    let sign = if rate_bps < 0 { "-" } else { "" };
    let abs = rate_bps.unsigned_abs();
    let (whole, hundredths) = (abs / 100, abs % 100);
    if hundredths == 0 {
        format!("{sign}{whole}%")
    } else if hundredths.is_multiple_of(10) {
        format!("{sign}{whole}{}{}%", fmt.decimal, hundredths / 10)
    } else {
        format!("{sign}{whole}{}{hundredths:02}%", fmt.decimal)
    }
}

/// A date as the locale writes it: en "2026-11-24", de "24.11.2026", fr "24/11/2026".
pub fn date(d: NaiveDate, locale: &str) -> String {
    let (y, m, day) = (d.year(), d.month(), d.day());
    match Locale::of(locale) {
        Locale::En => format!("{y:04}-{m:02}-{day:02}"),
        Locale::De => format!("{day:02}.{m:02}.{y:04}"),
        Locale::Fr => format!("{day:02}/{m:02}/{y:04}"),
    }
}

// ---------------------------------------------------------------------------------------
// Number formats

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Locale {
    En,
    De,
    Fr,
}

impl Locale {
    /// "de", "de-DE", "de_AT", "DE" → de; anything unknown → en.
    fn of(locale: &str) -> Locale {
        let lang = locale
            .trim()
            .split(['-', '_'])
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        match lang.as_str() {
            "de" => Locale::De,
            "fr" => Locale::Fr,
            _ => Locale::En,
        }
    }
}

struct NumberFormat {
    locale: Locale,
    group: &'static str,
    decimal: &'static str,
}

impl NumberFormat {
    fn of(locale: &str) -> NumberFormat {
        let locale = Locale::of(locale);
        let (group, decimal) = match locale {
            Locale::En => (",", "."),
            Locale::De => (".", ","),
            Locale::Fr => (" ", ","),
        };
        NumberFormat {
            locale,
            group,
            decimal,
        }
    }

    /// 1234567 → "1,234,567" (en).
    fn grouped(&self, n: u64) -> String {
        let digits = n.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3 * self.group.len());
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push_str(self.group);
            }
            out.push(c);
        }
        out
    }
}

/// A quantity with the locale's digit grouping.
fn quantity(n: i64, locale: &str) -> String {
    let sign = if n < 0 { "-" } else { "" };
    format!(
        "{sign}{}",
        NumberFormat::of(locale).grouped(n.unsigned_abs())
    )
}

/// [`money`], writing the code instead of a symbol `printable` refuses (one the PDF's font
/// has no glyph for).
fn money_with(
    minor: i64,
    currency: &str,
    locale: &str,
    printable: impl Fn(&str) -> bool,
) -> String {
    let code = currency.trim().to_ascii_uppercase();
    let known = iso_currency::Currency::from_code(&code);
    let exponent = known.and_then(|c| c.exponent()).map_or(2, u32::from).min(6);
    let symbol = known.map(|c| c.symbol().symbol).filter(|s| {
        let s = s.trim();
        !s.is_empty() && s != code && s != "¤" && !s.chars().any(is_right_to_left) && printable(s)
    });

    let fmt = NumberFormat::of(locale);
    let abs = minor.unsigned_abs();
    let unit = 10u64.pow(exponent);
    let mut number = fmt.grouped(abs / unit);
    if exponent > 0 {
        number.push_str(fmt.decimal);
        number.push_str(&format!(
            "{:0width$}",
            abs % unit,
            width = exponent as usize
        ));
    }
    let sign = if minor < 0 { "-" } else { "" };
    match (fmt.locale, symbol) {
        (Locale::En, Some(symbol)) => format!("{sign}{}{number}", symbol.trim()),
        (_, Some(symbol)) => format!("{sign}{number} {}", symbol.trim()),
        (_, None) if code.is_empty() => format!("{sign}{number}"),
        (Locale::En, None) => format!("{sign}{code} {number}"),
        (_, None) => format!("{sign}{number} {code}"),
    }
}

fn is_right_to_left(c: char) -> bool {
    matches!(c, '\u{0590}'..='\u{08FF}' | '\u{FB1D}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}')
}

// ---------------------------------------------------------------------------------------
// Fonts and measuring

static REGULAR_TTF: &[u8] = include_bytes!("assets/DejaVuSans.ttf");
static BOLD_TTF: &[u8] = include_bytes!("assets/DejaVuSans-Bold.ttf");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Regular,
    Bold,
}

struct Face {
    font: Font,
    charmap: Charmap<'static>,
    /// Advances in em (at size 1).
    metrics: GlyphMetrics<'static>,
}

struct Faces {
    regular: Face,
    bold: Face,
}

impl Face {
    fn load(bytes: &'static [u8], name: &str) -> Result<Face, String> {
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

    fn has(&self, c: char) -> bool {
        self.charmap.map(c).is_some()
    }

    /// The glyph for `c` (the font's "missing" box if it has none) and its advance in em.
    fn glyph(&self, c: char) -> (skrifa::GlyphId, f32) {
        let id = self.charmap.map(c).unwrap_or(skrifa::GlyphId::NOTDEF);
        let advance = self.metrics.advance_width(id).unwrap_or(0.0);
        (id, if advance.is_finite() { advance } else { 0.0 })
    }

    fn shape(&self, text: &str) -> Vec<KrillaGlyph> {
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

    fn width(&self, text: &str, size: f32) -> f32 {
        text.chars().map(|c| self.glyph(c).1).sum::<f32>() * size
    }
}

impl Faces {
    fn get(&self, style: Style) -> &Face {
        match style {
            Style::Regular => &self.regular,
            Style::Bold => &self.bold,
        }
    }

    fn width(&self, text: &str, style: Style, size: f32) -> f32 {
        self.get(style).width(text, size)
    }

    /// `text` cut to fit `max_w`, ending with "…" if it was cut.
    fn ellipsize(&self, text: &str, style: Style, size: f32, max_w: f32) -> String {
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
    fn cut_here(&self, line: &str, style: Style, size: f32, max_w: f32) -> String {
        if line.ends_with(ELLIPSIS) {
            return line.to_owned();
        }
        self.ellipsize(&format!("{line}{ELLIPSIS}"), style, size, max_w)
    }

    /// The size (at most `size`, at least 70% of it) at which `text` fits `max_w`, and the
    /// text, cut with "…" if it does not fit even then.
    fn fit(&self, text: &str, style: Style, size: f32, max_w: f32) -> (String, f32) {
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
    fn wrap(
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

static FACES: OnceLock<Result<Faces, String>> = OnceLock::new();

fn faces() -> Result<&'static Faces, String> {
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

const ELLIPSIS: &str = "…";

/// Text from outside as one line: control characters (newlines included) become spaces,
/// runs of whitespace one space.
fn clean_line(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text from outside that may have lines (memo, footer, reason): "\r\n" and "\r" become
/// "\n", tabs spaces, other control characters go. Capped, so that a huge memo costs
/// nothing (what is drawn is capped by lines anyway).
fn clean_text(text: &str) -> String {
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

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Invoice => "Invoice",
        Kind::CreditNote => "Credit note",
    }
}

// ---------------------------------------------------------------------------------------
// Layout: what goes where on which page, in points from the page's top left corner.

const PAGE_W: f32 = 595.0;
const PAGE_H: f32 = 842.0;
const MARGIN: f32 = 48.0;
const LEFT: f32 = MARGIN;
const RIGHT: f32 = PAGE_W - MARGIN;
const CONTENT_W: f32 = RIGHT - LEFT;
/// Baseline of the page number line.
const PAGE_NUMBER_Y: f32 = PAGE_H - 28.0;

/// Body text.
const BODY: f32 = 9.0;
const SMALL: f32 = 7.5;

type Rgb = (u8, u8, u8);
const INK: Rgb = (0x1f, 0x23, 0x28);
const MUTED: Rgb = (0x5f, 0x66, 0x6d);
const FAINT: Rgb = (0x8a, 0x90, 0x96);
const RULE_DARK: Rgb = (0x3a, 0x3f, 0x44);
const RULE_LIGHT: Rgb = (0xdd, 0xe0, 0xe3);

fn rgb_color((r, g, b): Rgb) -> rgb::Color {
    rgb::Color::new(r, g, b)
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    /// `text` with its baseline's left end at (`x`, `y`).
    Text {
        x: f32,
        y: f32,
        size: f32,
        style: Style,
        color: Rgb,
        text: String,
    },
    /// A horizontal line.
    Rule {
        x1: f32,
        x2: f32,
        y: f32,
        width: f32,
        color: Rgb,
    },
}

/// Pages being filled top to bottom.
struct Pager<'f> {
    faces: &'f Faces,
    done: Vec<Vec<Op>>,
    page: Vec<Op>,
    /// The top of what comes next.
    y: f32,
    /// Where the content must end (above the footer).
    bottom: f32,
}

impl<'f> Pager<'f> {
    fn new(faces: &'f Faces, bottom: f32) -> Self {
        Pager {
            faces,
            done: Vec::new(),
            page: Vec::new(),
            y: MARGIN,
            bottom,
        }
    }

    fn new_page(&mut self) {
        self.done.push(std::mem::take(&mut self.page));
        self.y = MARGIN;
    }

    /// Whether `height` more fits on this page.
    fn fits(&self, height: f32) -> bool {
        self.y + height <= self.bottom
    }

    fn text(&mut self, x: f32, y: f32, text: &str, style: Style, size: f32, color: Rgb) {
        if text.is_empty() {
            return;
        }
        self.page.push(Op::Text {
            x,
            y,
            size,
            style,
            color,
            text: text.to_owned(),
        });
    }

    /// `text` ending at `right`; made smaller or cut so that it starts no further left than
    /// `right - max_w`.
    #[allow(clippy::too_many_arguments)]
    fn text_right(
        &mut self,
        right: f32,
        y: f32,
        text: &str,
        style: Style,
        size: f32,
        color: Rgb,
        max_w: f32,
    ) {
        let (text, size) = self.faces.fit(text, style, size, max_w);
        let w = self.faces.width(&text, style, size);
        self.text(right - w, y, &text, style, size, color);
    }

    fn rule(&mut self, x1: f32, x2: f32, y: f32, width: f32, color: Rgb) {
        self.page.push(Op::Rule {
            x1,
            x2,
            y,
            width,
            color,
        });
    }

    fn finish(mut self) -> Vec<Vec<Op>> {
        self.done.push(self.page);
        self.done
    }
}

/// Line height for text of `size`.
fn leading(size: f32) -> f32 {
    size * 1.4
}

/// The baseline of a line of text of `size` whose line box starts at `top`.
fn baseline(top: f32, size: f32) -> f32 {
    top + size * 1.05
}

/// The table's columns: Description | Qty | Unit price | Tax | Amount; the numbers
/// right-aligned, each column as wide as its widest cell, the description the rest.
struct Columns {
    desc_w: f32,
    /// (right edge, width) of Qty, Unit price, Tax, Amount.
    numeric: [(f32, f32); 4],
}

const TABLE_HEADERS: [&str; 4] = ["Qty", "Unit price", "Tax", "Amount"];
const TABLE_SIZE: f32 = BODY;
const HEADER_SIZE: f32 = 8.0;
const COLUMN_GAP: f32 = 14.0;
const MIN_DESC_W: f32 = 160.0;
const MAX_DESC_LINES: usize = 6;

impl Columns {
    fn new(faces: &Faces, cells: &[[String; 4]]) -> Columns {
        let mut widths = [0.0f32; 4];
        for (i, header) in TABLE_HEADERS.iter().enumerate() {
            widths[i] = faces.width(header, Style::Bold, HEADER_SIZE);
        }
        for row in cells {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(faces.width(cell, Style::Regular, TABLE_SIZE));
            }
        }
        // Very large amounts: shrink the numeric columns (their cells are then set smaller,
        // see Pager::text_right) so that the description keeps some room.
        let room = CONTENT_W - MIN_DESC_W - 4.0 * COLUMN_GAP;
        let total: f32 = widths.iter().sum();
        if total > room {
            for w in &mut widths {
                *w *= room / total;
            }
        }
        let mut numeric = [(0.0, 0.0); 4];
        let mut right = RIGHT;
        for i in (0..4).rev() {
            numeric[i] = (right, widths[i]);
            right -= widths[i] + COLUMN_GAP;
        }
        Columns {
            desc_w: right - LEFT,
            numeric,
        }
    }
}

fn table_header(p: &mut Pager, cols: &Columns) {
    let y = baseline(p.y, HEADER_SIZE);
    p.text(LEFT, y, "Description", Style::Bold, HEADER_SIZE, MUTED);
    for (i, header) in TABLE_HEADERS.iter().enumerate() {
        let (right, w) = cols.numeric[i];
        p.text_right(right, y, header, Style::Bold, HEADER_SIZE, MUTED, w);
    }
    p.y += leading(HEADER_SIZE) + 3.0;
    p.rule(LEFT, RIGHT, p.y, 0.8, RULE_DARK);
    p.y += 5.0;
}

/// Draws a block of (label, value) rows with the values right-aligned at `right`, the
/// labels left-aligned in front of them; returns where it ends.
fn key_values(p: &mut Pager, right: f32, top: f32, rows: &[(&str, String)], max_w: f32) -> f32 {
    let faces = p.faces;
    let label_w = rows
        .iter()
        .map(|(l, _)| faces.width(l, Style::Regular, BODY))
        .fold(0.0, f32::max);
    let value_w = rows
        .iter()
        .map(|(_, v)| faces.width(v, Style::Bold, BODY))
        .fold(0.0, f32::max)
        .min(max_w * 0.65);
    let gap = 12.0;
    let label_w = label_w.min(max_w - value_w - gap);
    let mut y = top;
    for (label, value) in rows {
        let b = baseline(y, BODY);
        let label = faces.ellipsize(label, Style::Regular, BODY, label_w);
        p.text(
            right - value_w - gap - label_w,
            b,
            &label,
            Style::Regular,
            BODY,
            MUTED,
        );
        p.text_right(right, b, value, Style::Bold, BODY, INK, value_w);
        y += leading(BODY);
    }
    y
}

/// A "From" / "Bill to" block; returns where it ends.
fn party_block(
    p: &mut Pager,
    x: f32,
    top: f32,
    w: f32,
    heading: &str,
    party: &Party,
    email: bool,
) -> f32 {
    let faces = p.faces;
    let mut y = top;
    p.text(
        x,
        baseline(y, HEADER_SIZE),
        heading,
        Style::Bold,
        HEADER_SIZE,
        MUTED,
    );
    y += leading(HEADER_SIZE) + 2.0;

    let name_size = 10.5;
    for line in faces.wrap(&clean_line(&party.name), Style::Bold, name_size, w, 2) {
        p.text(
            x,
            baseline(y, name_size),
            &line,
            Style::Bold,
            name_size,
            INK,
        );
        y += leading(name_size);
    }

    let mut rest: Vec<String> = party
        .address
        .iter()
        .map(|l| clean_line(l))
        .filter(|l| !l.is_empty())
        .collect();
    if email {
        rest.extend(
            party
                .email
                .as_deref()
                .map(clean_line)
                .filter(|l| !l.is_empty()),
        );
    }
    rest.extend(
        party
            .tax_id
            .as_deref()
            .map(clean_line)
            .filter(|l| !l.is_empty())
            .map(|t| format!("Tax ID: {t}")),
    );
    // At most 10 lines, so that the header can never fill the first page.
    let mut lines = Vec::new();
    for item in &rest {
        lines.extend(faces.wrap(item, Style::Regular, BODY, w, 2));
    }
    if lines.len() > 10 {
        lines.truncate(10);
        if let Some(last) = lines.last_mut() {
            *last = faces.cut_here(last, Style::Regular, BODY, w);
        }
    }
    for line in lines {
        p.text(x, baseline(y, BODY), &line, Style::Regular, BODY, INK);
        y += leading(BODY);
    }
    y
}

fn layout(doc: &Document, faces: &Faces) -> Vec<Vec<Op>> {
    let locale = doc.locale.as_str();
    let money = |minor: i64| {
        money_with(minor, &doc.currency, locale, |s| {
            s.chars().all(|c| faces.regular.has(c) && faces.bold.has(c))
        })
    };
    let number = clean_line(&doc.number);

    // The footer sits at the bottom of every page; the content ends above it.
    let footer = doc
        .footer
        .as_deref()
        .map(|f| faces.wrap(&clean_text(f), Style::Regular, SMALL, CONTENT_W, 4))
        .unwrap_or_default();
    let footer_top = PAGE_NUMBER_Y - 14.0 - footer.len() as f32 * leading(SMALL);
    let bottom = if footer.is_empty() {
        PAGE_NUMBER_Y - 20.0
    } else {
        footer_top - 14.0
    };
    let mut p = Pager::new(faces, bottom);

    // Title and number (left), dates (right).
    let dates: Vec<(&str, String)> = std::iter::once(("Issue date", date(doc.issue_date, locale)))
        .chain(doc.due_date.map(|d| ("Due date", date(d, locale))))
        .collect();
    let dates_w = 190.0;
    let title_w = CONTENT_W - dates_w - 16.0;
    let title = match doc.kind {
        Kind::Invoice => "INVOICE",
        Kind::CreditNote => "CREDIT NOTE",
    };
    let (title, title_size) = faces.fit(title, Style::Bold, 22.0, title_w);
    p.text(
        LEFT,
        baseline(p.y, title_size),
        &title,
        Style::Bold,
        title_size,
        INK,
    );
    p.y += leading(title_size);
    let number_size = 12.0;
    for line in faces.wrap(&number, Style::Bold, number_size, title_w, 2) {
        p.text(
            LEFT,
            baseline(p.y, number_size),
            &line,
            Style::Bold,
            number_size,
            MUTED,
        );
        p.y += leading(number_size);
    }
    let right_end = key_values(&mut p, RIGHT, MARGIN + 4.0, &dates, dates_w);
    p.y = p.y.max(right_end);

    if doc.kind == Kind::CreditNote {
        p.y += 6.0;
        if let Some(original) = doc.original_number.as_deref().map(clean_line) {
            let text = format!("Credit note for invoice {original}");
            for line in faces.wrap(&text, Style::Regular, BODY, CONTENT_W, 2) {
                p.text(LEFT, baseline(p.y, BODY), &line, Style::Regular, BODY, INK);
                p.y += leading(BODY);
            }
        }
        if let Some(reason) = doc.reason.as_deref().map(clean_text) {
            if !reason.trim().is_empty() {
                let text = format!("Reason: {}", reason.trim());
                for line in faces.wrap(&text, Style::Regular, BODY, CONTENT_W, 4) {
                    p.text(LEFT, baseline(p.y, BODY), &line, Style::Regular, BODY, INK);
                    p.y += leading(BODY);
                }
            }
        }
    }

    // From / Bill to.
    p.y += 22.0;
    let col_w = (CONTENT_W - 24.0) / 2.0;
    let top = p.y;
    let from_end = party_block(&mut p, LEFT, top, col_w, "From", &doc.seller, false);
    let to_end = party_block(
        &mut p,
        LEFT + col_w + 24.0,
        top,
        col_w,
        "Bill to",
        &doc.buyer,
        true,
    );
    p.y = from_end.max(to_end) + 26.0;

    // The lines.
    let cells: Vec<[String; 4]> = doc
        .lines
        .iter()
        .map(|l| {
            [
                quantity(l.quantity, locale),
                money(l.unit_amount),
                percent(l.tax_rate_bps, locale),
                money(l.net_amount),
            ]
        })
        .collect();
    let cols = Columns::new(faces, &cells);
    let row_leading = leading(TABLE_SIZE);
    let pad = 4.0;
    if !p.fits(leading(HEADER_SIZE) + 8.0 + row_leading + 2.0 * pad) {
        p.new_page();
    }
    table_header(&mut p, &cols);
    for (line, row) in doc.lines.iter().zip(&cells) {
        let desc = faces.wrap(
            &clean_line(&line.name),
            Style::Regular,
            TABLE_SIZE,
            cols.desc_w,
            MAX_DESC_LINES,
        );
        let height = desc.len().max(1) as f32 * row_leading + 2.0 * pad;
        if !p.fits(height) {
            p.new_page();
            table_header(&mut p, &cols);
        }
        let first = baseline(p.y + pad, TABLE_SIZE);
        for (i, text) in desc.iter().enumerate() {
            p.text(
                LEFT,
                first + i as f32 * row_leading,
                text,
                Style::Regular,
                TABLE_SIZE,
                INK,
            );
        }
        for (i, cell) in row.iter().enumerate() {
            let (right, w) = cols.numeric[i];
            p.text_right(right, first, cell, Style::Regular, TABLE_SIZE, INK, w);
        }
        p.y += height;
        p.rule(LEFT, RIGHT, p.y, 0.4, RULE_LIGHT);
    }

    // Totals, right-aligned under the table.
    let mut rows: Vec<(String, String, bool)> =
        vec![("Subtotal".into(), money(doc.subtotal), false)];
    if doc.by_rate.is_empty() {
        rows.push(("Tax".into(), money(doc.tax), false));
    }
    for rate in &doc.by_rate {
        rows.push((
            format!(
                "Tax {} on {}",
                percent(rate.rate_bps, locale),
                money(rate.net)
            ),
            money(rate.tax),
            false,
        ));
    }
    let emphasized_from = rows.len();
    match doc.kind {
        Kind::Invoice => {
            rows.push(("Total".into(), money(doc.total), true));
            rows.push(("Amount paid".into(), money(doc.amount_paid), false));
            rows.push(("Amount due".into(), money(doc.amount_due), true));
        }
        Kind::CreditNote => rows.push(("Total credited".into(), money(doc.total), true)),
    }
    let total_size = 10.0;
    let row_h = leading(total_size) + 1.0;
    let height = 14.0 + rows.len() as f32 * row_h + 8.0;
    p.y += 10.0;
    if !p.fits(height) {
        p.new_page();
    }
    let value_w = rows
        .iter()
        .map(|(_, v, bold)| {
            faces.width(
                v,
                if *bold { Style::Bold } else { Style::Regular },
                total_size,
            )
        })
        .fold(0.0, f32::max)
        .min(CONTENT_W * 0.45);
    let label_w = rows
        .iter()
        .map(|(l, _, bold)| {
            faces.width(
                l,
                if *bold { Style::Bold } else { Style::Regular },
                total_size,
            )
        })
        .fold(0.0, f32::max)
        .min(CONTENT_W - value_w - 24.0);
    let block_w = (label_w + 24.0 + value_w).clamp(230.0, CONTENT_W);
    let block_left = RIGHT - block_w;
    p.rule(block_left, RIGHT, p.y, 0.8, RULE_DARK);
    p.y += 6.0;
    for (i, (label, value, bold)) in rows.iter().enumerate() {
        if i == emphasized_from {
            p.y += 2.0;
            p.rule(block_left, RIGHT, p.y, 0.4, RULE_LIGHT);
            p.y += 4.0;
        }
        let style = if *bold { Style::Bold } else { Style::Regular };
        let b = baseline(p.y, total_size);
        let label = faces.ellipsize(label, style, total_size, label_w);
        p.text(
            block_left,
            b,
            &label,
            style,
            total_size,
            if *bold { INK } else { MUTED },
        );
        p.text_right(RIGHT, b, value, style, total_size, INK, value_w);
        p.y += row_h;
    }

    // Memo, flowing onto further pages if it must.
    if let Some(memo) = doc.memo.as_deref().map(clean_text) {
        let memo = memo.trim();
        if !memo.is_empty() {
            p.y += 18.0;
            let size = 8.5;
            for line in faces.wrap(memo, Style::Regular, size, CONTENT_W, 150) {
                if !p.fits(leading(size)) {
                    p.new_page();
                }
                p.text(LEFT, baseline(p.y, size), &line, Style::Regular, size, INK);
                p.y += leading(size);
            }
        }
    }

    // Footer and page number on every page.
    let mut pages = p.finish();
    let count = pages.len();
    let reference = format!("{} {}", kind_name(doc.kind), number);
    let reference = faces.ellipsize(reference.trim(), Style::Regular, SMALL, CONTENT_W * 0.6);
    for (i, ops) in pages.iter_mut().enumerate() {
        let mut p = Pager::new(faces, PAGE_H);
        if !footer.is_empty() {
            p.rule(LEFT, RIGHT, footer_top - 6.0, 0.4, RULE_LIGHT);
        }
        for (j, line) in footer.iter().enumerate() {
            let w = faces.width(line, Style::Regular, SMALL);
            let y = baseline(footer_top + j as f32 * leading(SMALL), SMALL);
            p.text(
                LEFT + (CONTENT_W - w).max(0.0) / 2.0,
                y,
                line,
                Style::Regular,
                SMALL,
                MUTED,
            );
        }
        p.text(
            LEFT,
            PAGE_NUMBER_Y,
            &reference,
            Style::Regular,
            SMALL,
            FAINT,
        );
        let page_number = format!("Page {} of {}", i + 1, count);
        p.text_right(
            RIGHT,
            PAGE_NUMBER_Y,
            &page_number,
            Style::Regular,
            SMALL,
            FAINT,
            CONTENT_W * 0.35,
        );
        ops.extend(p.finish().into_iter().flatten());
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    fn line(name: &str, quantity: i64, unit_amount: i64, tax_rate_bps: i64) -> Line {
        let net_amount = quantity.saturating_mul(unit_amount);
        let tax_amount = net_amount.saturating_mul(tax_rate_bps) / 10_000;
        Line {
            name: name.into(),
            quantity,
            unit_amount,
            tax_rate_bps,
            tax_amount,
            net_amount,
            total_amount: net_amount.saturating_add(tax_amount),
        }
    }

    fn document(kind: Kind, currency: &str, locale: &str, lines: Vec<Line>) -> Document {
        let mut by_rate: Vec<RateTotal> = Vec::new();
        for l in &lines {
            match by_rate.iter_mut().find(|r| r.rate_bps == l.tax_rate_bps) {
                Some(r) => {
                    r.net = r.net.saturating_add(l.net_amount);
                    r.tax = r.tax.saturating_add(l.tax_amount);
                }
                None => by_rate.push(RateTotal {
                    rate_bps: l.tax_rate_bps,
                    net: l.net_amount,
                    tax: l.tax_amount,
                }),
            }
        }
        let sum = |f: fn(&Line) -> i64| lines.iter().map(f).fold(0i64, i64::saturating_add);
        let subtotal = sum(|l| l.net_amount);
        let tax = sum(|l| l.tax_amount);
        let total = subtotal.saturating_add(tax);
        Document {
            kind,
            number: "INV-2026-0042".into(),
            original_number: None,
            issue_date: d(2026, 11, 24),
            due_date: Some(d(2026, 12, 8)),
            currency: currency.into(),
            locale: locale.into(),
            seller: Party {
                name: "Atelier Łódź GmbH".into(),
                address: vec![
                    "ul. Piotrkowska 12".into(),
                    "90-001 Łódź".into(),
                    "PL".into(),
                ],
                email: Some("billing@atelier.example".into()),
                tax_id: Some("PL1234567890".into()),
            },
            buyer: Party {
                name: "Жанна Иванова".into(),
                address: vec!["Tverskaya 1".into(), "125009 Moscow".into()],
                email: Some("zhanna@example.com".into()),
                tax_id: None,
            },
            lines,
            by_rate,
            subtotal,
            tax,
            total,
            amount_paid: 0,
            amount_due: total,
            memo: Some("Thank you for your business.".into()),
            footer: Some("Atelier Łódź GmbH · IBAN DE00 0000 0000 0000 0000 00".into()),
            reason: None,
        }
    }

    fn text_of(pdf: &[u8]) -> String {
        pdf_extract::extract_text_from_mem(pdf).expect("extractable text")
    }

    /// Every piece of text and every rule lies inside the page's margins.
    fn assert_inside(pages: &[Vec<Op>]) {
        let faces = faces().unwrap();
        for (n, ops) in pages.iter().enumerate() {
            for op in ops {
                match op {
                    Op::Text {
                        x,
                        y,
                        size,
                        style,
                        text,
                        ..
                    } => {
                        let w = faces.width(text, *style, *size);
                        assert!(
                            *x >= LEFT - 0.01 && x + w <= RIGHT + 0.01,
                            "page {n}: {text:?} at x {x}..{} is outside the margins",
                            x + w
                        );
                        assert!(
                            *y >= MARGIN && *y <= PAGE_H - 20.0,
                            "page {n}: {text:?} at y {y} is off the page"
                        );
                    }
                    Op::Rule { x1, x2, y, .. } => {
                        assert!(*x1 >= LEFT - 0.01 && *x2 <= RIGHT + 0.01);
                        assert!(*y >= MARGIN && *y <= PAGE_H - MARGIN / 2.0);
                    }
                }
            }
        }
    }

    #[test]
    fn money_en() {
        assert_eq!(money(123_456, "EUR", "en"), "€1,234.56");
        assert_eq!(money(1_235, "JPY", "en"), "¥1,235");
        assert_eq!(money(-500, "USD", "en"), "-$5.00");
        assert_eq!(money(5, "GBP", "en"), "£0.05");
        assert_eq!(money(0, "EUR", "en"), "€0.00");
        assert_eq!(money(-123_456_789, "INR", "en"), "-₹1,234,567.89");
        assert_eq!(money(99_900, "RUB", ""), "₽999.00");
        assert_eq!(money(123_456, "eur", "en"), "€1,234.56");
    }

    #[test]
    fn money_de_fr() {
        assert_eq!(money(123_456, "EUR", "de"), "1.234,56 €");
        assert_eq!(money(123_456, "EUR", "fr"), "1 234,56 €");
        assert_eq!(money(-500, "EUR", "de"), "-5,00 €");
        assert_eq!(money(-123_456, "EUR", "fr"), "-1 234,56 €");
        assert_eq!(money(1_234_567, "JPY", "de"), "1.234.567 ¥");
        assert_eq!(money(123_456, "EUR", "de-AT"), "1.234,56 €");
        assert_eq!(money(123_456, "EUR", "fr_CA"), "1 234,56 €");
    }

    #[test]
    fn money_unknown_locale_is_en() {
        assert_eq!(money(123_456, "EUR", "xx"), "€1,234.56");
        assert_eq!(money(123_456, "EUR", ""), "€1,234.56");
    }

    #[test]
    fn money_falls_back_to_the_code() {
        // Unknown code: written as given, 2 decimals.
        assert_eq!(money(1_234, "ABC", "en"), "ABC 12.34");
        assert_eq!(money(1_234, "ABC", "de"), "12,34 ABC");
        // A right-to-left symbol (BHD: 3 decimals).
        assert_eq!(money(1_234_567, "BHD", "en"), "BHD 1,234.567");
        assert_eq!(money(-1_000, "KWD", "fr"), "-1,000 KWD");
        // No minor unit known (gold): 2 decimals, and no "¤".
        assert_eq!(money(100, "XAU", "en"), "XAU 1.00");
        assert_eq!(money(100, "", "en"), "1.00");
    }

    #[test]
    fn money_extremes_do_not_panic() {
        assert_eq!(money(i64::MIN, "EUR", "en"), "-€92,233,720,368,547,758.08");
        assert_eq!(money(i64::MAX, "JPY", "fr"), "9 223 372 036 854 775 807 ¥");
    }

    #[test]
    fn percent_formats() {
        assert_eq!(percent(2000, "en"), "20%");
        assert_eq!(percent(550, "en"), "5.5%");
        assert_eq!(percent(1925, "en"), "19.25%");
        assert_eq!(percent(705, "en"), "7.05%");
        assert_eq!(percent(5, "en"), "0.05%");
        assert_eq!(percent(0, "en"), "0%");
        assert_eq!(percent(-250, "en"), "-2.5%");
        assert_eq!(percent(550, "de"), "5,5%");
        assert_eq!(percent(1925, "fr"), "19,25%");
        assert_eq!(percent(1900, "de"), "19%");
        assert_eq!(percent(i64::MIN, "en"), "-92233720368547758.08%");
    }

    #[test]
    fn date_formats() {
        assert_eq!(date(d(2026, 11, 24), "en"), "2026-11-24");
        assert_eq!(date(d(2026, 11, 24), "de"), "24.11.2026");
        assert_eq!(date(d(2026, 1, 2), "fr"), "02/01/2026");
        assert_eq!(date(d(2026, 1, 2), "nl"), "2026-01-02");
    }

    #[test]
    fn quantity_is_grouped() {
        assert_eq!(quantity(1_234_567, "en"), "1,234,567");
        assert_eq!(quantity(-1_000, "de"), "-1.000");
        assert_eq!(quantity(12, "fr"), "12");
    }

    #[test]
    fn credit_note_text_is_extractable() {
        let mut doc = document(
            Kind::CreditNote,
            "EUR",
            "en",
            vec![
                line("Consulting — Łódź workshop", 2, 50_000, 2000),
                line("Ελληνικά μαθήματα", 1, 12_345, 700),
            ],
        );
        doc.number = "CN-2026-0007".into();
        doc.original_number = Some("INV-2026-0042".into());
        doc.reason = Some("Workshop cancelled".into());
        let pdf = render(&doc).unwrap();
        assert!(pdf.starts_with(b"%PDF-"));
        let text = text_of(&pdf);
        for needle in [
            "CREDIT NOTE",
            "CN-2026-0007",
            "Credit note for invoice INV-2026-0042",
            "Reason: Workshop cancelled",
            "Consulting — Łódź workshop",
            "Ελληνικά μαθήματα",
            "Жанна",
            "Atelier Łódź GmbH",
            "€",
            "Total credited",
            "€1,332.09",
            "Tax 20% on €1,000.00",
            "Page 1 of 1",
        ] {
            assert!(text.contains(needle), "{needle:?} not in:\n{text}");
        }
        assert!(!text.contains("Amount due"));
    }

    #[test]
    fn long_jpy_invoice_flows_onto_more_pages() {
        let lines = (1..=60)
            .map(|i| {
                line(
                    &format!("Item number {i}"),
                    i,
                    1_500,
                    if i % 2 == 0 { 1000 } else { 800 },
                )
            })
            .collect();
        let doc = document(Kind::Invoice, "JPY", "en", lines);
        let pages = layout(&doc, faces().unwrap());
        assert!(pages.len() >= 2, "{} pages", pages.len());
        assert_inside(&pages);
        let pdf = render(&doc).unwrap();
        let text = text_of(&pdf);
        let count = pages.len();
        for needle in [
            "INVOICE".to_owned(),
            "INV-2026-0042".to_owned(),
            "Item number 1".to_owned(),
            "Item number 60".to_owned(),
            "Жанна Иванова".to_owned(),
            money(doc.total, "JPY", "en"),
            "¥".to_owned(),
            "Amount due".to_owned(),
            format!("Page 1 of {count}"),
            format!("Page {count} of {count}"),
        ] {
            assert!(text.contains(&needle), "{needle:?} not in:\n{text}");
        }
        // The table's header is on every page that has lines.
        assert!(text.matches("Unit price").count() >= 2);
    }

    #[test]
    fn currency_symbols_print() {
        for (currency, symbol) in [
            ("EUR", "€"),
            ("GBP", "£"),
            ("JPY", "¥"),
            ("INR", "₹"),
            ("RUB", "₽"),
            ("USD", "$"),
        ] {
            let doc = document(
                Kind::Invoice,
                currency,
                "en",
                vec![line("Widget", 1, 1_000, 0)],
            );
            let text = text_of(&render(&doc).unwrap());
            assert!(text.contains(symbol), "{symbol} not in:\n{text}");
            assert!(faces().unwrap().regular.has(symbol.chars().next().unwrap()));
        }
    }

    #[test]
    fn german_locale() {
        let doc = document(
            Kind::Invoice,
            "EUR",
            "de",
            vec![line("Beratung", 3, 41_152, 1900)],
        );
        let text = text_of(&render(&doc).unwrap());
        for needle in [
            "24.11.2026",
            "08.12.2026",
            "1.234,56 €",
            "19%",
            "Tax 19% on 1.234,56 €",
        ] {
            assert!(text.contains(needle), "{needle:?} not in:\n{text}");
        }
    }

    #[test]
    fn long_texts_stay_inside_the_page() {
        let long = "Lorem ipsum dolor sit amet, consectetur adipiscing elit ".repeat(40);
        let unbroken = "X".repeat(400);
        let mut lines = vec![
            line(&long, 1, 100, 2000),
            line(&unbroken, 123_456_789, 987_654_321, 1925),
        ];
        lines[1].net_amount = i64::MAX;
        let mut doc = document(Kind::CreditNote, "EUR", "fr", lines);
        doc.number = unbroken.clone();
        doc.original_number = Some(unbroken.clone());
        doc.reason = Some(long.clone());
        doc.seller.name = long.clone();
        doc.seller.address = vec![long.clone(); 30];
        doc.buyer.email = Some(unbroken.clone());
        doc.buyer.tax_id = Some(long.clone());
        doc.memo = Some(format!("{long}\n\n{unbroken}\n").repeat(20));
        doc.footer = Some(long.clone());
        doc.subtotal = i64::MIN;
        doc.total = i64::MAX;
        doc.by_rate.push(RateTotal {
            rate_bps: 123_456,
            net: i64::MIN,
            tax: i64::MAX,
        });
        let pages = layout(&doc, faces().unwrap());
        assert_inside(&pages);
        render(&doc).unwrap();
    }

    #[test]
    fn nearly_empty_document_renders() {
        let doc = Document {
            kind: Kind::Invoice,
            number: String::new(),
            original_number: None,
            issue_date: d(2026, 1, 1),
            due_date: None,
            currency: String::new(),
            locale: String::new(),
            seller: Party::default(),
            buyer: Party::default(),
            lines: Vec::new(),
            by_rate: Vec::new(),
            subtotal: 0,
            tax: 0,
            total: 0,
            amount_paid: 0,
            amount_due: 0,
            memo: Some(" \n\t".into()),
            footer: None,
            reason: None,
        };
        let pages = layout(&doc, faces().unwrap());
        assert_eq!(pages.len(), 1);
        assert_inside(&pages);
        let text = text_of(&render(&doc).unwrap());
        assert!(
            text.contains("INVOICE") && text.contains("Page 1 of 1"),
            "{text}"
        );
    }

    #[test]
    fn control_characters_and_missing_glyphs() {
        let mut doc = document(
            Kind::Invoice,
            "EUR",
            "en",
            vec![line("Tab\there\u{0}\u{7}", 1, 100, 0)],
        );
        doc.buyer.name = "東京 Shop\r\nLtd".into();
        let text = text_of(&render(&doc).unwrap());
        assert!(text.contains("Tab here"), "{text}");
    }

    #[test]
    fn amounts_are_right_aligned() {
        let doc = document(
            Kind::Invoice,
            "EUR",
            "en",
            vec![line("A", 1, 100, 2000), line("B", 1_000, 123_456, 2000)],
        );
        let faces = faces().unwrap();
        let pages = layout(&doc, faces);
        let ends = |needle: &str| -> Vec<f32> {
            pages[0]
                .iter()
                .filter_map(|op| match op {
                    Op::Text {
                        x,
                        size,
                        style,
                        text,
                        ..
                    } if text == needle => Some(x + faces.width(text, *style, *size)),
                    _ => None,
                })
                .collect()
        };
        let close = |a: f32, b: f32| (a - b).abs() < 0.01;
        // Line A's unit price and amount, line B's unit price and amount.
        let a = ends("€1.00");
        let (b_unit, b_net) = (ends("€1,234.56"), ends("€1,234,560.00"));
        assert_eq!((a.len(), b_unit.len(), b_net.len()), (2, 1, 1), "{a:?}");
        assert!(close(b_net[0], RIGHT), "{b_net:?}");
        assert!(a.iter().any(|&e| close(e, RIGHT)), "{a:?}");
        assert!(a.iter().any(|&e| close(e, b_unit[0])), "{a:?} {b_unit:?}");
        assert!(b_unit[0] < RIGHT - 60.0);
    }

    #[test]
    fn rendering_is_deterministic() {
        let doc = document(Kind::Invoice, "EUR", "en", vec![line("A", 1, 100, 2000)]);
        assert_eq!(render(&doc).unwrap(), render(&doc).unwrap());
    }
}
