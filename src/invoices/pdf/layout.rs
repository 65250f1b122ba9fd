//! Laying a document out on A4 pages, part by part (heading, parties, the lines' table,
//! totals, memo, then the footer and page number on every page), as drawing operations that
//! `render` turns into the PDF.

use krilla::color::rgb;

use super::fonts::{clean_line, clean_text, Faces, Style};
use super::{date, money_with, percent, quantity, Document, Kind, Party};

pub(super) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Invoice => "Invoice",
        Kind::CreditNote => "Credit note",
    }
}

// ---------------------------------------------------------------------------------------
// Layout: what goes where on which page, in points from the page's top left corner.

pub(super) const PAGE_W: f32 = 595.0;
pub(super) const PAGE_H: f32 = 842.0;
pub(super) const MARGIN: f32 = 48.0;
pub(super) const LEFT: f32 = MARGIN;
pub(super) const RIGHT: f32 = PAGE_W - MARGIN;
pub(super) const CONTENT_W: f32 = RIGHT - LEFT;
/// Baseline of the page number line.
pub(super) const PAGE_NUMBER_Y: f32 = PAGE_H - 28.0;

/// Body text.
pub(super) const BODY: f32 = 9.0;
pub(super) const SMALL: f32 = 7.5;

pub(super) type Rgb = (u8, u8, u8);
pub(super) const INK: Rgb = (0x1f, 0x23, 0x28);
pub(super) const MUTED: Rgb = (0x5f, 0x66, 0x6d);
pub(super) const FAINT: Rgb = (0x8a, 0x90, 0x96);
pub(super) const RULE_DARK: Rgb = (0x3a, 0x3f, 0x44);
pub(super) const RULE_LIGHT: Rgb = (0xdd, 0xe0, 0xe3);

pub(super) fn rgb_color((r, g, b): Rgb) -> rgb::Color {
    rgb::Color::new(r, g, b)
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Op {
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
pub(super) struct Pager<'f> {
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
pub(super) fn leading(size: f32) -> f32 {
    size * 1.4
}

/// The baseline of a line of text of `size` whose line box starts at `top`.
pub(super) fn baseline(top: f32, size: f32) -> f32 {
    top + size * 1.05
}

/// The table's columns: Description | Qty | Unit price | Tax | Amount; the numbers
/// right-aligned, each column as wide as its widest cell, the description the rest.
pub(super) struct Columns {
    desc_w: f32,
    /// (right edge, width) of Qty, Unit price, Tax, Amount.
    numeric: [(f32, f32); 4],
}

pub(super) const TABLE_HEADERS: [&str; 4] = ["Qty", "Unit price", "Tax", "Amount"];
pub(super) const TABLE_SIZE: f32 = BODY;
pub(super) const HEADER_SIZE: f32 = 8.0;
pub(super) const COLUMN_GAP: f32 = 14.0;
pub(super) const MIN_DESC_W: f32 = 160.0;
pub(super) const MAX_DESC_LINES: usize = 6;

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

pub(super) fn table_header(p: &mut Pager, cols: &Columns) {
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
pub(super) fn key_values(
    p: &mut Pager,
    right: f32,
    top: f32,
    rows: &[(&str, String)],
    max_w: f32,
) -> f32 {
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
pub(super) fn party_block(
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

/// The document's pages, as drawing operations: each part of the page in its turn, the lines'
/// table and the memo flowing onto further pages, then the footer and page number on each.
pub(super) fn layout(doc: &Document, faces: &Faces) -> Vec<Vec<Op>> {
    let locale = doc.locale.as_str();
    let money = |minor: i64| {
        money_with(minor, &doc.currency, locale, |s| {
            s.chars().all(|c| faces.regular.has(c) && faces.bold.has(c))
        })
    };
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
    heading(&mut p, doc);
    parties(&mut p, doc);
    lines_table(&mut p, doc, &money);
    totals(&mut p, doc, &money);
    memo(&mut p, doc);
    let mut pages = p.finish();
    footers(&mut pages, doc, faces, &footer, footer_top);
    pages
}

/// Title and number (left), dates (right); for a credit note, the invoice it credits and why.
fn heading(p: &mut Pager, doc: &Document) {
    let (faces, locale) = (p.faces, doc.locale.as_str());
    let number = clean_line(&doc.number);
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
    let right_end = key_values(p, RIGHT, MARGIN + 4.0, &dates, dates_w);
    p.y = p.y.max(right_end);
    if doc.kind == Kind::CreditNote {
        p.y += 6.0;
        if let Some(original) = doc.original_number.as_deref().map(clean_line) {
            paragraph(p, &format!("Credit note for invoice {original}"), 2);
        }
        if let Some(reason) = doc.reason.as_deref().map(clean_text) {
            if !reason.trim().is_empty() {
                paragraph(p, &format!("Reason: {}", reason.trim()), 4);
            }
        }
    }
}

/// `text` across the page in body type, in at most `max_lines` lines.
fn paragraph(p: &mut Pager, text: &str, max_lines: usize) {
    for line in p
        .faces
        .wrap(text, Style::Regular, BODY, CONTENT_W, max_lines)
    {
        p.text(LEFT, baseline(p.y, BODY), &line, Style::Regular, BODY, INK);
        p.y += leading(BODY);
    }
}

/// From (the seller) and Bill to (the buyer), side by side.
fn parties(p: &mut Pager, doc: &Document) {
    p.y += 22.0;
    let col_w = (CONTENT_W - 24.0) / 2.0;
    let top = p.y;
    let from_end = party_block(p, LEFT, top, col_w, "From", &doc.seller, false);
    let to_end = party_block(
        p,
        LEFT + col_w + 24.0,
        top,
        col_w,
        "Bill to",
        &doc.buyer,
        true,
    );
    p.y = from_end.max(to_end) + 26.0;
}

/// The lines' table, its header repeated on each page it flows onto.
fn lines_table(p: &mut Pager, doc: &Document, money: &dyn Fn(i64) -> String) {
    let (faces, locale) = (p.faces, doc.locale.as_str());
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
    table_header(p, &cols);
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
            table_header(p, &cols);
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
}

/// The totals' rows: (label, amount, emphasized), and where the emphasized part starts.
fn total_rows(
    doc: &Document,
    money: &dyn Fn(i64) -> String,
) -> (Vec<(String, String, bool)>, usize) {
    let locale = doc.locale.as_str();
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
    (rows, emphasized_from)
}

/// The totals, right-aligned under the table.
fn totals(p: &mut Pager, doc: &Document, money: &dyn Fn(i64) -> String) {
    let faces = p.faces;
    let (rows, emphasized_from) = total_rows(doc, money);
    let total_size = 10.0;
    let style = |bold: bool| if bold { Style::Bold } else { Style::Regular };
    let row_h = leading(total_size) + 1.0;
    let height = 14.0 + rows.len() as f32 * row_h + 8.0;
    p.y += 10.0;
    if !p.fits(height) {
        p.new_page();
    }
    let value_w = rows
        .iter()
        .map(|(_, v, bold)| faces.width(v, style(*bold), total_size))
        .fold(0.0, f32::max)
        .min(CONTENT_W * 0.45);
    let label_w = rows
        .iter()
        .map(|(l, _, bold)| faces.width(l, style(*bold), total_size))
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
        let style = style(*bold);
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
}

/// The memo, flowing onto further pages if it must.
fn memo(p: &mut Pager, doc: &Document) {
    let Some(memo) = doc.memo.as_deref().map(clean_text) else {
        return;
    };
    let memo = memo.trim();
    if memo.is_empty() {
        return;
    }
    p.y += 18.0;
    let size = 8.5;
    for line in p.faces.wrap(memo, Style::Regular, size, CONTENT_W, 150) {
        if !p.fits(leading(size)) {
            p.new_page();
        }
        p.text(LEFT, baseline(p.y, size), &line, Style::Regular, size, INK);
        p.y += leading(size);
    }
}

/// The footer and "Page i of n" (with the document's reference) on every page.
fn footers(
    pages: &mut [Vec<Op>],
    doc: &Document,
    faces: &Faces,
    footer: &[String],
    footer_top: f32,
) {
    let count = pages.len();
    let reference = format!("{} {}", kind_name(doc.kind), clean_line(&doc.number));
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
}
