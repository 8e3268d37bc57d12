//! Line charts as SVG (plotters' SVG backend; no font files needed).

use std::path::Path;

use anyhow::anyhow;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// One named line.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart (one or more panels side by side, sharing nothing).
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// The panels, left to right.
    pub panels: Vec<Panel>,
}

/// One panel of a chart.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// Caption above the panel.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Logarithmic x axis (points with x <= 0 are left out).
    pub log_x: bool,
    /// Logarithmic y axis (points with y <= 0 are left out).
    pub log_y: bool,
}

impl Series {
    /// A series named `name` with `points`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
        }
    }
}

impl Chart {
    /// A chart of the given panels.
    pub fn of(panels: Vec<Panel>) -> Self {
        Self { panels }
    }

    /// Writes the chart as an SVG file.
    pub fn write_svg(&self, path: &Path) -> anyhow::Result<()> {
        let n = self.panels.len().max(1);
        let width = u32::try_from(480 * n).unwrap_or(1920).min(2400);
        let root = SVGBackend::new(path, (width, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let areas = root.split_evenly((1, n));
        for (panel, area) in self.panels.iter().zip(areas.iter()) {
            draw_panel(panel, area).map_err(|e| anyhow!("{e}"))?;
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
        Ok(())
    }
}

impl Panel {
    /// Whether `(x, y)` can be drawn on this panel's axes.
    fn drawable(&self, (x, y): (f64, f64)) -> bool {
        x.is_finite() && y.is_finite() && (!self.log_x || x > 0.0) && (!self.log_y || y > 0.0)
    }
}

fn bounds(panel: &Panel) -> ((f64, f64), (f64, f64)) {
    let pts = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| panel.drawable(**p));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = if panel.log_x { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if panel.log_x {
        if x1 / x0 < 1.5 {
            (x0, x1) = (x0 / 1.5, x1 * 1.5);
        }
    } else if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    if !panel.log_y {
        return ((x0, x1), (0.0, y1 * 1.1));
    }
    if y0 > y1 {
        y0 = y1 / 10.0;
    }
    ((x0, x1), (y0 / 1.5, y1 * 1.5))
}

fn draw_panel<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, plotters::coord::Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let ((x0, x1), (y0, y1)) = bounds(panel);
    match (panel.log_x, panel.log_y) {
        (false, false) => draw_on(panel, area, x0..x1, y0..y1),
        (true, false) => draw_on(panel, area, (x0..x1).log_scale(), y0..y1),
        (false, true) => draw_on(panel, area, x0..x1, (y0..y1).log_scale()),
        (true, true) => draw_on(panel, area, (x0..x1).log_scale(), (y0..y1).log_scale()),
    }
}

fn draw_on<DB, X, Y>(
    panel: &Panel,
    area: &DrawingArea<DB, plotters::coord::Shift>,
    x: X,
    y: Y,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .light_line_style(WHITE)
        .draw()?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = ShapeStyle::from(color).stroke_width(2);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|p| panel.drawable(*p))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        chart.draw_series(
            pts.iter()
                .map(|&(x, y)| Circle::new((x, y), 2, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_legend_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let chart = Chart::of(vec![Panel {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![
                Series::new("alpha", vec![(0.0, 1.0), (1.0, 2.0)]),
                Series::new("beta", vec![(0.0, 3.0)]),
                Series::new("empty", vec![]),
            ],
            ..Default::default()
        }]);
        chart.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        for name in ["alpha", "beta", "empty"] {
            assert!(svg.contains(name), "legend {name} missing");
        }
    }

    #[test]
    fn bounds_survive_empty_and_flat_data() {
        let p = Panel::default();
        assert_eq!(bounds(&p), ((0.0, 1.0), (0.0, 1.1)));
        let p = Panel {
            series: vec![Series::new("s", vec![(2.0, 0.0), (2.0, f64::NAN)])],
            ..Default::default()
        };
        assert_eq!(bounds(&p), ((2.0, 3.0), (0.0, 1.1)));
    }

    #[test]
    fn log_axes_leave_out_what_they_cannot_draw() {
        let p = Panel {
            series: vec![Series::new(
                "s",
                vec![(8.0, 0.0), (8.0, 0.02), (1024.0, 40.0), (0.0, 1.0)],
            )],
            log_x: true,
            log_y: true,
            ..Default::default()
        };
        let ((x0, x1), (y0, y1)) = bounds(&p);
        assert_eq!((x0, x1), (8.0, 1024.0));
        assert!(y0 > 0.0 && y0 < 0.02 && y1 > 40.0, "{y0} {y1}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.svg");
        Chart::of(vec![p, Panel::default()])
            .write_svg(&path)
            .unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
        // Nothing drawable on log axes: the default bounds are still valid.
        let empty = Panel {
            log_x: true,
            log_y: true,
            ..Default::default()
        };
        assert_eq!(bounds(&empty), ((1.0, 10.0), (0.1 / 1.5, 1.5)));
    }
}
