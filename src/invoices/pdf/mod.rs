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

use chrono::{Datelike, NaiveDate};
use krilla::geom::{PathBuilder, Point};
use krilla::metadata::Metadata;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke};

mod fonts;
mod layout;

use fonts::{clean_line, faces};
use layout::{kind_name, layout, rgb_color, Op, PAGE_H, PAGE_W};

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
#[cfg(test)]
mod tests {
    use super::fonts::faces;
    use super::layout::{LEFT, MARGIN, RIGHT};
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
