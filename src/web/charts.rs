//! Charts as inline SVG, made here and sent with the page (no script draws them): the
//! activity calendar, the hour-by-weekday heatmap and the bars of a share. Each cell says its
//! count in its `<title>`, its shade is one of five levels shown in a legend, and each chart
//! comes with a table of the same counts for a screen reader (in a `<details>`).

use maud::{Markup, html};

/// The weekdays, Monday first.
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The shade of `n` of a chart whose largest count is `max`: 0 for none, else 1 to 4 in
/// quarters of `max`.
pub(super) fn level(n: i64, max: i64) -> usize {
    match n {
        ..=0 => 0,
        _ => ((n * 4 + max.max(1) - 1) / max.max(1)).clamp(1, 4) as usize,
    }
}

/// The counts each level stands for, as the legend says them.
fn legend(max: i64, what: &str) -> Markup {
    let range = |l: i64| {
        let low = (max * (l - 1)) / 4 + 1;
        let high = (max * l) / 4;
        match (l, low >= high) {
            (0, _) => "none".to_owned(),
            (_, true) => high.to_string(),
            _ => format!("{low}–{high}"),
        }
    };
    html! {
        div.scale aria-hidden="true" {
            "Less "
            @for l in 0..5 {
                @if l == 0 || max >= l {
                    svg.chart width="11" height="11" viewBox="0 0 11 11" {
                        rect class=(format!("l{l}")) width="11" height="11" rx="2" { title { (range(l)) " " (what) } }
                    }
                }
            }
            " More"
        }
    }
}

/// A pair of a day's date (`YYYY-MM-DD`) as its month's index and day of the month.
fn month_day(date: &str) -> (usize, u32) {
    let month = date
        .get(5..7)
        .and_then(|m| m.parse::<usize>().ok())
        .unwrap_or(1);
    let day = date.get(8..10).and_then(|d| d.parse().ok()).unwrap_or(1);
    (month.clamp(1, 12) - 1, day)
}

/// The activity calendar: a column a week (Monday at the top), a cell a day, shaded by its
/// sessions, each a link to `link(day)`; `days` starts on a Monday.
pub(super) fn calendar(days: &[(String, i64)], link: impl Fn(&str) -> String) -> Markup {
    const CELL: usize = 13;
    const LEFT: usize = 30;
    const TOP: usize = 16;
    let max = days.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let weeks = days.len().div_ceil(7);
    let width = LEFT + weeks * CELL;
    let height = TOP + 7 * CELL;
    let active: Vec<&(String, i64)> = days.iter().filter(|(_, n)| *n > 0).collect();
    html! {
        div.calendar {
            // A group, not an image: its cells are links.
            svg.chart #calendar viewBox=(format!("0 0 {width} {height}")) role="group"
                aria-label=(format!("Sessions active each day, {} days", days.len())) {
                @for (row, name) in WEEKDAYS.iter().enumerate().filter(|(r, _)| r % 2 == 0) {
                    text.axis x="0" y=(TOP + row * CELL + 10) { (&name[..3]) }
                }
                @for (i, (date, n)) in days.iter().enumerate() {
                    @let (week, row) = (i / 7, i % 7);
                    @let (month, day) = month_day(date);
                    @if row == 0 && day <= 7 {
                        text.axis x=(LEFT + week * CELL) y="10" { (MONTHS[month]) }
                    }
                    a href=(link(date)) aria-label=(format!("{date}: {}", sessions(*n))) {
                        rect class=(format!("day l{}", level(*n, max))) data-day=(date) data-count=(n)
                            x=(LEFT + week * CELL) y=(TOP + row * CELL) width="11" height="11" rx="2" {
                            title { (date) ": " (sessions(*n)) }
                        }
                    }
                }
            }
            (legend(max, "sessions"))
            details.table {
                summary { "The days as a table" }
                table {
                    thead { tr { th { "Day" } th.num { "Sessions active" } } }
                    tbody {
                        @for (date, n) in &active {
                            tr { td { a href=(link(date)) { (date) } } td.num { (n) } }
                        }
                    }
                }
            }
        }
    }
}

/// "1 session", "3 sessions".
fn sessions(n: i64) -> String {
    match n {
        1 => "1 session".to_owned(),
        _ => format!("{n} sessions"),
    }
}

/// The hour-by-weekday heatmap of session starts (`grid[weekday][hour]`, Monday first), in
/// the time `zone` names.
pub(super) fn heatmap(grid: &[[i64; 24]; 7], zone: &str) -> Markup {
    const W: usize = 26;
    const H: usize = 20;
    const LEFT: usize = 36;
    const TOP: usize = 16;
    let max = grid.iter().flatten().copied().max().unwrap_or(0);
    html! {
        div.heatmap {
            svg.chart #heatmap viewBox=(format!("0 0 {} {}", LEFT + 24 * W, TOP + 7 * H)) role="img"
                aria-label=(format!("Sessions started by weekday and hour, {zone}")) {
                @for hour in (0..24).step_by(3) {
                    text.axis x=(LEFT + hour * W) y="10" { (format!("{hour:02}")) }
                }
                @for (day, hours) in grid.iter().enumerate() {
                    text.axis x="0" y=(TOP + day * H + 14) { (&WEEKDAYS[day][..3]) }
                    @for (hour, n) in hours.iter().enumerate() {
                        rect class=(format!("hour l{}", level(*n, max))) data-count=(n)
                            x=(LEFT + hour * W) y=(TOP + day * H) width=(W - 3) height=(H - 3) rx="2" {
                            title { (WEEKDAYS[day]) " " (format!("{hour:02}:00–{:02}:00", hour + 1)) ": " (sessions(*n)) " started" }
                        }
                    }
                }
            }
            (legend(max, "sessions"))
            details.table {
                summary { "The hours as a table" }
                table.hours {
                    thead { tr { th { "Day" } @for hour in 0..24 { th.num { (format!("{hour:02}")) } } } }
                    tbody {
                        @for (day, hours) in grid.iter().enumerate() {
                            tr { th { (WEEKDAYS[day]) } @for n in hours { td.num { (n) } } }
                        }
                    }
                }
            }
        }
    }
}

/// A bar of `n` of `max`, for a row of a table that says the number.
pub(super) fn bar(n: i64, max: i64) -> Markup {
    let width = n.max(0) as f64 * 100.0 / max.max(1) as f64;
    html! {
        svg.chart.bar viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true" {
            rect x="0" y="0" width=(format!("{width:.1}")) height="8" rx="1.5" {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_shaded_in_quarters_of_the_largest_and_none_alone_is_blank() {
        assert_eq!(level(0, 8), 0);
        assert_eq!(level(1, 8), 1);
        assert_eq!(level(2, 8), 1);
        assert_eq!(level(3, 8), 2);
        assert_eq!(level(8, 8), 4);
        assert_eq!(level(1, 1), 4);
    }

    #[test]
    fn the_calendar_has_a_cell_a_day_titled_with_its_count() {
        let days: Vec<(String, i64)> = (1..=14)
            .map(|d| (format!("2026-12-{d:02}"), (d % 3) as i64))
            .collect();
        let svg = calendar(&days, |d| format!("/sessions?day={d}")).into_string();
        assert_eq!(svg.matches("<rect class=\"day").count(), 14);
        assert!(
            svg.contains("<title>2026-12-02: 2 sessions</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>2026-12-01: 1 session</title>"),
            "{svg}"
        );
        assert!(svg.contains("href=\"/sessions?day=2026-12-03\""), "{svg}");
    }
}
