//! The RTOS paper's scalable tire: a pure mass–spring–damper model, stepped by semi-implicit
//! (symplectic) Euler, the explicit method that is stable at the paper's 10 ms step.
//!
//! `4·k` point masses sit on a circle. Each is joined by a spring–damper to its two neighbours
//! on the circumference and to its mirror node in the opposite quadrant (the diametrically
//! opposite node: the tire's spokes, with no central mass). Gravity is the only external
//! force and the floor `y = 0` is a simple constraint. The tire starts at rest above the floor,
//! in free fall.
//!
//! Masses, stiffness and damping are given for the whole tire and divided by the node count,
//! so the tire's behaviour and the integrator's stability (the paper's "low stiffness") do not
//! depend on the resolution: a node's natural frequency is `√(3K/M)` for any `k`.
//!
//! The step of one node reads only the previous state ([`Tire::step_node`]), so a parallel
//! solver that double-buffers gets bit-identical results whatever its thread count.

use serde::Serialize;

/// Standard gravity, m/s².
const GRAVITY: f64 = 9.81;

/// A node's state: position and velocity in the plane (x right, y up), SI units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Node {
    /// Position x, m.
    pub x: f64,
    /// Position y, m (the floor is y = 0).
    pub y: f64,
    /// Velocity x, m/s.
    pub vx: f64,
    /// Velocity y, m/s.
    pub vy: f64,
}

/// The tire's physical parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TireParams {
    /// Nodes per quadrant (`k`); the tire has `4·k` nodes.
    pub per_quadrant: usize,
    /// Radius, m.
    pub radius: f64,
    /// Height of the lowest node above the floor at the start, m.
    pub drop: f64,
    /// Total mass, kg.
    pub mass: f64,
    /// Total stiffness `K`, N/m: each spring gets `K / n`.
    pub stiffness: f64,
    /// Total damping `C`, N·s/m: each damper gets `C / n`.
    pub damping: f64,
    /// Time step, s (the paper: 10 ms).
    pub dt: f64,
}

impl TireParams {
    /// A 0.3 m, 10 kg tire dropped from 0.2 m, stepped at 100 Hz. Semi-implicit Euler is stable
    /// while the fastest mode keeps `√(6K/M)·dt ≈ 1.1` and `6C/M·dt = 1.5` below 2 (a node
    /// has three links, each pulling at most twice as hard in the worst mode); `C` gives each
    /// spring a damping ratio of about 0.28 so the tire settles within the paper's 60 s. It
    /// is a soft tire, as the paper's explicit solver demands.
    pub fn with_quadrant_nodes(per_quadrant: usize) -> TireParams {
        TireParams {
            per_quadrant,
            radius: 0.3,
            drop: 0.2,
            mass: 10.0,
            stiffness: 20_000.0,
            damping: 250.0,
            dt: 0.01,
        }
    }

    /// Nodes in the tire.
    pub fn nodes(&self) -> usize {
        4 * self.per_quadrant
    }
}

/// The tire: parameters and connectivity. Immutable while stepping.
#[derive(Clone, Debug)]
pub struct Tire {
    params: TireParams,
    /// Per node: the three nodes it is joined to, and the springs' rest lengths.
    links: Vec<[(usize, f64); 3]>,
    node_mass: f64,
    spring_k: f64,
    damper_c: f64,
}

/// Parameters that cannot make a tire.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum TireError {
    /// `per_quadrant` is 0 or too large.
    #[error("{0} nodes per quadrant is out of range: give 1 to 1,000,000")]
    Nodes(usize),
    /// A physical parameter is not finite and positive.
    #[error("tire parameters must be finite and positive")]
    Physics,
}

impl Tire {
    /// Builds the tire's connectivity.
    pub fn new(params: TireParams) -> Result<Tire, TireError> {
        if !(1..=1_000_000).contains(&params.per_quadrant) {
            return Err(TireError::Nodes(params.per_quadrant));
        }
        let positive = [
            params.radius,
            params.mass,
            params.stiffness,
            params.damping,
            params.dt,
        ];
        let drop_ok = params.drop.is_finite() && params.drop >= 0.0;
        if positive.iter().any(|v| !v.is_finite() || *v <= 0.0) || !drop_ok {
            return Err(TireError::Physics);
        }
        let n = params.nodes();
        let start = Tire::initial_positions(&params);
        let rest = |i: usize, j: usize| {
            let (a, b) = (start[i], start[j]);
            (b.x - a.x).hypot(b.y - a.y)
        };
        let links = (0..n)
            .map(|i| {
                let (prev, next, opposite) = ((i + n - 1) % n, (i + 1) % n, (i + n / 2) % n);
                [
                    (prev, rest(i, prev)),
                    (next, rest(i, next)),
                    (opposite, rest(i, opposite)),
                ]
            })
            .collect();
        Ok(Tire {
            params,
            links,
            node_mass: params.mass / n as f64,
            spring_k: params.stiffness / n as f64,
            damper_c: params.damping / n as f64,
        })
    }

    fn initial_positions(params: &TireParams) -> Vec<Node> {
        let n = params.nodes();
        let centre_y = params.drop + params.radius;
        (0..n)
            .map(|i| {
                // Node 0 on the right of the horizontal axis; nodes k, 2k, 3k on the others.
                let angle = std::f64::consts::TAU * i as f64 / n as f64;
                Node {
                    x: params.radius * angle.cos(),
                    y: centre_y + params.radius * angle.sin(),
                    vx: 0.0,
                    vy: 0.0,
                }
            })
            .collect()
    }

    /// The state at time 0: at rest, lowest node `drop` above the floor.
    pub fn initial_state(&self) -> Vec<Node> {
        Tire::initial_positions(&self.params)
    }

    /// The parameters.
    pub fn params(&self) -> &TireParams {
        &self.params
    }

    /// Nodes in the tire.
    pub fn nodes(&self) -> usize {
        self.links.len()
    }

    /// The nodes node `i` is joined to.
    pub fn neighbours(&self, i: usize) -> [usize; 3] {
        self.links[i].map(|(j, _)| j)
    }

    /// Node `i`'s state after one step, given the previous state of any node by `state`.
    ///
    /// Semi-implicit (symplectic) Euler: the velocity is updated from the forces, then the
    /// position from the new velocity; still explicit and a fixed amount of work per step,
    /// which is what the benchmark needs, and stable at the paper's large step. The floor
    /// stops a node: no penetration, no bounce, no friction.
    pub fn step_node(&self, i: usize, state: impl Fn(usize) -> Node) -> Node {
        let me = state(i);
        let (mut fx, mut fy) = (0.0, -self.node_mass * GRAVITY);
        for &(j, rest) in &self.links[i] {
            let other = state(j);
            let (dx, dy) = (other.x - me.x, other.y - me.y);
            let length = dx.hypot(dy);
            if length <= f64::EPSILON {
                continue;
            }
            let (ux, uy) = (dx / length, dy / length);
            let stretch_speed = (other.vx - me.vx) * ux + (other.vy - me.vy) * uy;
            let f = self.spring_k * (length - rest) + self.damper_c * stretch_speed;
            fx += f * ux;
            fy += f * uy;
        }
        let dt = self.params.dt;
        let mut next = Node {
            vx: me.vx + fx / self.node_mass * dt,
            vy: me.vy + fy / self.node_mass * dt,
            ..me
        };
        next.x = me.x + next.vx * dt;
        next.y = me.y + next.vy * dt;
        if next.y < 0.0 {
            next.y = 0.0;
            next.vy = next.vy.max(0.0);
        }
        next
    }

    /// One step of the whole tire, single-threaded: `next` from `current`.
    pub fn step(&self, current: &[Node], next: &mut [Node]) {
        for (i, slot) in next.iter_mut().enumerate() {
            *slot = self.step_node(i, |j| current[j]);
        }
    }
}

/// Summary quantities of a state, for tests and reports.
pub fn kinetic_energy(tire: &Tire, state: &[Node]) -> f64 {
    let m = tire.params.mass / state.len() as f64;
    state
        .iter()
        .map(|n| 0.5 * m * (n.vx * n.vx + n.vy * n.vy))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tire: &Tire, steps: usize) -> Vec<Node> {
        let mut a = tire.initial_state();
        let mut b = a.clone();
        for _ in 0..steps {
            tire.step(&a, &mut b);
            std::mem::swap(&mut a, &mut b);
        }
        a
    }

    fn lowest(state: &[Node]) -> f64 {
        state.iter().map(|n| n.y).fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn connectivity_is_neighbours_and_the_opposite_node() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(3)).unwrap();
        assert_eq!(tire.nodes(), 12);
        assert_eq!(tire.neighbours(0), [11, 1, 6]);
        assert_eq!(tire.neighbours(7), [6, 8, 1]);
        // The spokes are diameters.
        let spoke = tire.links[0][2].1;
        assert!((spoke - 0.6).abs() < 1e-12);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert_eq!(
            Tire::new(TireParams::with_quadrant_nodes(0)).unwrap_err(),
            TireError::Nodes(0)
        );
        let mut p = TireParams::with_quadrant_nodes(2);
        p.dt = f64::NAN;
        assert_eq!(Tire::new(p).unwrap_err(), TireError::Physics);
    }

    /// Before touching the floor every node falls freely: after 0.1 s (10 steps) of
    /// semi-implicit Euler, vy = −g·t exactly and the drop is g·dt²·(1+…+10) = 55·g·dt².
    #[test]
    fn the_tire_starts_in_free_fall() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(5)).unwrap();
        let start = tire.initial_state();
        let state = run(&tire, 10);
        for (s, n) in start.iter().zip(&state) {
            assert!((n.vy + 0.981).abs() < 1e-9, "{n:?}");
            assert!((s.y - n.y - 55.0 * GRAVITY * 1e-4).abs() < 1e-9);
            assert!(n.vx.abs() < 1e-9);
        }
    }

    /// The tire touches the floor, never goes through it, and after the paper's 60 s
    /// (6000 steps) has come to rest on it, upright (its centre above half its radius).
    #[test]
    fn the_tire_falls_touches_the_floor_and_comes_to_rest() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(8)).unwrap();
        let mut a = tire.initial_state();
        let mut b = a.clone();
        let mut touched = false;
        for _ in 0..6000 {
            tire.step(&a, &mut b);
            std::mem::swap(&mut a, &mut b);
            assert!(lowest(&a) >= 0.0);
            touched |= lowest(&a) == 0.0;
        }
        assert!(touched);
        assert_eq!(lowest(&a), 0.0);
        assert!(
            kinetic_energy(&tire, &a) < 1e-6,
            "{}",
            kinetic_energy(&tire, &a)
        );
        let centre_y = a.iter().map(|n| n.y).sum::<f64>() / a.len() as f64;
        // Sagging under its weight, but far from flat (0) and below its radius.
        assert!(centre_y > 0.15 && centre_y < 0.3, "{centre_y}");
    }

    /// The tire and the forces are symmetric about the vertical axis, so node i and its
    /// mirror image (n/2 − i) stay mirror images; only floating-point rounding (the mirror's
    /// forces are summed with other signs) may part them, by far less than a micrometre.
    #[test]
    fn the_tire_stays_symmetric() {
        let tire = Tire::new(TireParams::with_quadrant_nodes(6)).unwrap();
        let n = tire.nodes();
        let state = run(&tire, 600);
        for i in 0..n {
            let m = (n / 2 + n - i) % n;
            assert!((state[i].x + state[m].x).abs() < 1e-6, "{i}");
            assert!((state[i].y - state[m].y).abs() < 1e-6, "{i}");
        }
    }
}
