//! Figures for `--plot FILE.svg|FILE.png`: a [`Chart`] (axes, series of points or lines, a
//! legend) and a [`HeatMap`] (a grid of labelled, coloured cells).
//!
//! Every figure is drawn once, as SVG, with plotters; a `.png` file is that SVG rasterised by
//! resvg, so both formats show the same picture. The text of a PNG needs a font installed
//! (Debian: `fonts-dejavu-core`, which `install.sh` installs); an SVG leaves fonts to its
//! viewer. The commands build figures from their own results: this module knows nothing of
//! what is plotted.

use std::path::Path;

use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Pixels of every figure (and CSS pixels of the SVG).
const SIZE: (u32, u32) = (960, 640);

/// Sans-serif families to write a PNG's text in, the first installed one winning.
const FONTS: [&str; 5] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Arial",
];

/// The file formats `--plot` writes, chosen by the file name's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `.svg`: vector, as drawn.
    Svg,
    /// `.png`: the SVG rasterised.
    Png,
}

impl Format {
    /// The format of `path`, or an error naming the extensions that work. Call it before a
    /// measurement runs, so a typo costs nothing.
    pub fn of(path: &Path) -> anyhow::Result<Format> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => anyhow::bail!(
                "--plot {}: give a file name ending in .svg or .png (the format follows the \
                 extension)",
                path.display()
            ),
        }
    }
}

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced values, from 0 (or the smallest value, when negative).
    Linear,
    /// Evenly spaced powers of ten, for values over several orders of magnitude.
    Log,
}

/// One axis: its label and its scale.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Printed along the axis, with the unit.
    pub label: String,
    /// How it maps values.
    pub scale: Scale,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
        }
    }

    /// A logarithmic axis.
    pub fn log(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Log,
        }
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Separate points, for samples.
    Points,
    /// Points joined in their order, for a curve over a swept parameter.
    Lines,
    /// Points joined in their order without a mark on each, for a series too dense to mark
    /// (a quantity over time, thousands of samples).
    Trace,
}

/// A named set of points, one entry of the legend.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend's label.
    pub name: String,
    /// `(x, y)` in the axes' units.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub style: Style,
}

/// A chart: series over two axes, with a title and a legend.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Above the plot.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// Drawn in order, each in its own colour.
    pub series: Vec<Series>,
    /// Draw the ideal `y = x` (labelled "ideal"), with one range shared by both axes so that
    /// it is the diagonal: for requested-vs-achieved figures.
    pub diagonal: bool,
    /// Raise the top of the vertical axis so the legend sits above every point, for series
    /// that fill the plot from side to side (a quantity over time).
    pub legend_above: bool,
}

/// The range an axis shows for values from `lo` to `hi`.
fn axis_range(scale: Scale, lo: f64, hi: f64) -> std::ops::Range<f64> {
    match scale {
        Scale::Log => lo.max(1e-3) / 2.0..hi * 1.5,
        Scale::Linear => lo.min(0.0) * 1.1..hi * 1.1,
    }
}

/// An axis label: whole numbers from 10 up, three significant digits below.
fn tick(v: &f64) -> String {
    if v.abs() >= 10.0 || *v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{}", (v * 1e3).round() / 1e3)
    }
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot: {e}")
}

impl Chart {
    /// Writes the chart to `path`, SVG or PNG by its extension.
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let points = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let usable = |scale: Scale, v: f64| v.is_finite() && (scale == Scale::Linear || v > 0.0);
        let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for (x, y) in points().filter(|&(x, y)| usable(self.x.scale, x) && usable(self.y.scale, y))
        {
            (x_lo, x_hi) = (x_lo.min(x), x_hi.max(x));
            (y_lo, y_hi) = (y_lo.min(y), y_hi.max(y));
        }
        if x_lo > x_hi || (x_hi <= 0.0 && y_hi <= 0.0) {
            anyhow::bail!("--plot {}: nothing to draw", path.display());
        }
        if self.diagonal {
            (x_lo, x_hi) = (x_lo.min(y_lo), x_hi.max(y_hi));
            (y_lo, y_hi) = (x_lo, x_hi);
        }
        let x_range = axis_range(self.x.scale, x_lo, x_hi);
        let mut y_range = axis_range(self.y.scale, y_lo, y_hi);
        if self.legend_above {
            // The legend takes about 16 pixels a series of the plot's 560: the points keep
            // the rest of its height.
            let free = 1.0 - (16.0 * self.series.len() as f64 + 16.0) / 560.0;
            let (lo, hi) = (y_range.start, y_range.end);
            y_range.end = match self.y.scale {
                Scale::Log => lo * (hi / lo).powf(1.0 / free.max(0.3)),
                Scale::Linear => lo + (hi - lo) / free.max(0.3),
            };
        }
        render(path, |root| {
            let mut builder = ChartBuilder::on(root);
            builder
                .caption(&self.title, ("sans-serif", 20))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(70);
            // One expansion per pair of scales: plotters gives each its own coordinate type.
            macro_rules! draw {
                ($x:expr, $y:expr) => {{
                    let mut chart = builder.build_cartesian_2d($x, $y).map_err(err)?;
                    chart
                        .configure_mesh()
                        .x_label_formatter(&tick)
                        .y_label_formatter(&tick)
                        .x_desc(self.x.label.as_str())
                        .y_desc(self.y.label.as_str())
                        .draw()
                        .map_err(err)?;
                    if self.diagonal {
                        let (lo, hi) = (x_lo, x_hi);
                        chart
                            .draw_series(LineSeries::new([(lo, lo), (hi, hi)], &BLACK))
                            .map_err(err)?
                            .label("ideal")
                            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLACK));
                    }
                    for (i, series) in self.series.iter().enumerate() {
                        let color = Palette99::pick(i).to_rgba();
                        let dots = series
                            .points
                            .iter()
                            .map(|&p| Circle::new(p, 3, color.filled()));
                        // A dense trace in thin lines, so the lines under it still show.
                        let width = if series.style == Style::Trace { 1 } else { 2 };
                        let line = || {
                            LineSeries::new(
                                series.points.iter().copied(),
                                color.stroke_width(width),
                            )
                        };
                        let drawn = match series.style {
                            Style::Points => chart.draw_series(dots).map_err(err)?,
                            Style::Trace => chart.draw_series(line()).map_err(err)?,
                            Style::Lines => {
                                chart.draw_series(line()).map_err(err)?;
                                chart.draw_series(dots).map_err(err)?
                            }
                        };
                        let drawn = drawn.label(series.name.as_str());
                        match series.style {
                            Style::Trace => drawn.legend(move |(x, y)| {
                                PathElement::new([(x, y), (x + 15, y)], color.stroke_width(2))
                            }),
                            _ => drawn
                                .legend(move |(x, y)| Circle::new((x + 7, y), 4, color.filled())),
                        };
                    }
                    chart
                        .configure_series_labels()
                        .position(SeriesLabelPosition::UpperLeft)
                        .background_style(WHITE.mix(0.8))
                        .border_style(BLACK)
                        .draw()
                        .map_err(err)?;
                }};
            }
            match (self.x.scale, self.y.scale) {
                (Scale::Linear, Scale::Linear) => draw!(x_range, y_range),
                (Scale::Linear, Scale::Log) => draw!(x_range, y_range.log_scale()),
                (Scale::Log, Scale::Linear) => draw!(x_range.log_scale(), y_range),
                (Scale::Log, Scale::Log) => draw!(x_range.log_scale(), y_range.log_scale()),
            }
            Ok(())
        })
    }
}

/// One cell of a [`HeatMap`].
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Index into [`HeatMap::columns`].
    pub column: usize,
    /// Index into [`HeatMap::rows`].
    pub row: usize,
    /// 0 (nothing: blue) through yellow to 1 (everything: red).
    pub heat: f64,
    /// Printed in the cell.
    pub label: String,
}

/// A grid of coloured cells with labelled rows and columns: one figure per sweep of two
/// parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct HeatMap {
    /// Above the grid.
    pub title: String,
    /// Column labels, left to right.
    pub columns: Vec<String>,
    /// Row labels, bottom to top.
    pub rows: Vec<String>,
    /// The cells; a missing one stays white.
    pub cells: Vec<Cell>,
}

impl HeatMap {
    /// Writes the heat map to `path`, SVG or PNG by its extension.
    pub fn draw(&self, path: &Path) -> anyhow::Result<()> {
        if self.rows.is_empty() || self.columns.is_empty() {
            anyhow::bail!("--plot {}: nothing to draw", path.display());
        }
        render(path, |root| {
            let mut chart = ChartBuilder::on(root)
                .caption(&self.title, ("sans-serif", 20))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(80)
                .build_cartesian_2d(
                    0f64..self.columns.len() as f64,
                    0f64..self.rows.len() as f64,
                )
                .map_err(err)?;
            // Labels sit at the middle of each cell; the other ticks stay blank.
            let name = |names: &[String], v: f64| {
                names
                    .get(v.floor() as usize)
                    .filter(|_| v.fract() == 0.5)
                    .cloned()
                    .unwrap_or_default()
            };
            chart
                .configure_mesh()
                .disable_mesh()
                .x_labels(2 * self.columns.len() + 1)
                .y_labels(2 * self.rows.len() + 1)
                .x_label_formatter(&|v| name(&self.columns, *v))
                .y_label_formatter(&|v| name(&self.rows, *v))
                .draw()
                .map_err(err)?;
            for cell in &self.cells {
                let (x, y) = (cell.column as f64, cell.row as f64);
                let heat = cell.heat.clamp(0.0, 1.0);
                let color = if heat == 0.0 {
                    RGBColor(70, 110, 200)
                } else {
                    RGBColor(230, (200.0 * (1.0 - heat)) as u8, 40)
                };
                chart
                    .draw_series([Rectangle::new(
                        [(x + 0.02, y + 0.02), (x + 0.98, y + 0.98)],
                        color.filled(),
                    )])
                    .map_err(err)?;
                chart
                    .draw_series([Text::new(
                        cell.label.clone(),
                        (x + 0.42, y + 0.55),
                        ("sans-serif", 16),
                    )])
                    .map_err(err)?;
            }
            Ok(())
        })
    }
}

/// Draws with `draw` on a white SVG canvas, then writes `path` in the format its name asks for.
fn render(
    path: &Path,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let format = Format::of(path)?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        draw(&root)?;
        root.present().map_err(err)?;
    }
    let bytes = match format {
        Format::Svg => svg.into_bytes(),
        Format::Png => rasterise(&svg).with_context(|| format!("--plot {}", path.display()))?,
    };
    crate::output::write(path, &[], &bytes)
}

/// The PNG of `svg`, its generic `sans-serif` text set in the first of [`FONTS`] installed (or
/// any font at all).
fn rasterise(svg: &str) -> anyhow::Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    let installed = |name: &str| {
        fonts
            .faces()
            .any(|face| face.families.iter().any(|(family, _)| family == name))
    };
    let family = FONTS
        .iter()
        .find(|name| installed(name))
        .map(|name| name.to_string())
        .or_else(|| {
            fonts
                .faces()
                .find_map(|face| face.families.first().map(|(family, _)| family.clone()))
        })
        .context(
            "no font installed for the PNG's text: install one (Debian and Ubuntu: apt-get \
             install fonts-dejavu-core), or write SVG",
        )?;
    fonts.set_sans_serif_family(&family);
    options.font_family = family;
    let tree = usvg::Tree::from_str(svg, &options).map_err(err)?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .context("allocating the PNG's pixels")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Chart {
        Chart {
            title: "round trip vs size".into(),
            x: Axis::linear("size, bytes"),
            y: Axis::log("round trip, µs"),
            series: vec![
                Series {
                    name: "best".into(),
                    points: vec![(60.0, 9.5), (760.0, 10.0), (1514.0, 12.0)],
                    style: Style::Lines,
                },
                Series {
                    name: "worst".into(),
                    points: vec![(60.0, 90.0), (760.0, 300.0), (1514.0, 4000.0)],
                    style: Style::Points,
                },
            ],
            diagonal: false,
            legend_above: false,
        }
    }

    #[test]
    fn the_extension_chooses_the_format() {
        assert_eq!(Format::of(Path::new("a/b.svg")).unwrap(), Format::Svg);
        assert_eq!(Format::of(Path::new("b.PNG")).unwrap(), Format::Png);
        for bad in ["b.jpg", "b", "b.svg.gz"] {
            let e = Format::of(Path::new(bad)).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(".svg or .png"), "{e}");
        }
    }

    /// Decodes a PNG: its size, and whether each pixel is inked (clearly darker than white),
    /// row by row.
    fn decode(path: &Path) -> ((u32, u32), Vec<bool>) {
        let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
        let mut reader = png::Decoder::new(file).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let channels = info.color_type.samples();
        let inked = pixels[..info.buffer_size()]
            .chunks(channels)
            .map(|p| p[..3].iter().any(|&c| c < 200))
            .collect();
        ((info.width, info.height), inked)
    }

    #[test]
    fn a_png_chart_decodes_at_its_size_with_its_text() {
        let dir = std::env::temp_dir().join(format!("rtemu-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("chart.png");
        chart().draw(&png).unwrap();
        let (size, inked) = decode(&png);
        assert_eq!(size, SIZE);
        // Axes, tick labels, legend and series: thousands of dark pixels; a blank or
        // all-black image fails.
        let ink = inked.iter().filter(|&&i| i).count();
        assert!(
            ink > 2_000 && ink < inked.len() / 2,
            "{ink} of {} pixels inked",
            inked.len()
        );
        // The title is the only thing in the top 35 rows: ink there means a font set it.
        let title = inked[..35 * SIZE.0 as usize].iter().filter(|&&i| i).count();
        assert!(title > 100, "{title} pixels of title");
        // The SVG is the same drawing, as text.
        let svg = dir.join("chart.svg");
        chart().draw(&svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("round trip vs size"));
        let heat = dir.join("heat.png");
        HeatMap {
            title: "missed".into(),
            columns: vec!["1 thr".into(), "2 thr".into()],
            rows: vec!["100 nodes".into()],
            cells: vec![Cell {
                column: 1,
                row: 0,
                heat: 1.0,
                label: "100.0".into(),
            }],
        }
        .draw(&heat)
        .unwrap();
        let (size, inked) = decode(&heat);
        assert_eq!(size, SIZE);
        // The red cell fills about a quarter of the picture.
        assert!(inked.iter().filter(|&&i| i).count() > inked.len() / 8);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nothing_to_draw_is_an_error_not_an_empty_file() {
        let dir = std::env::temp_dir().join(format!("rtemu-plot-empty-{}", std::process::id()));
        let path = dir.join("empty.svg");
        let empty = Chart {
            series: vec![],
            ..chart()
        };
        let e = empty.draw(&path).unwrap_err().to_string();
        assert!(e.contains("nothing to draw"), "{e}");
        assert!(!path.exists());
        let e = chart()
            .draw(&dir.join("chart.gif"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(".svg or .png"), "{e}");
    }
}
