use std::str::FromStr;

use super::Plan;

/// Requests per minute for each plan (`GATEHOUSE_RATE_LIMITS`,
/// `free=60,starter=120,pro=300,business=1000,enterprise=5000` by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits([u32; 5]);

impl RateLimits {
    /// The requests per minute allowed on `plan`; always at least 1.
    pub fn per_minute(&self, plan: Plan) -> u32 {
        self.0[plan as usize]
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        Self([60, 120, 300, 1000, 5000])
    }
}

impl FromStr for RateLimits {
    type Err = String;

    /// `plan=n` pairs separated by commas; plans not named keep their default.
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let mut limits = Self::default();
        for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (plan, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not plan=requests"))?;
            let plan: Plan = plan.trim().parse().map_err(|e| format!("{plan:?}: {e}"))?;
            let value: u32 = value
                .trim()
                .parse()
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| format!("{value:?} is not a positive number of requests"))?;
            limits.0[plan as usize] = value;
        }
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_keeps_defaults() {
        let limits: RateLimits = "free=10, pro=20".parse().unwrap();
        assert_eq!(limits.per_minute(Plan::Free), 10);
        assert_eq!(limits.per_minute(Plan::Pro), 20);
        assert_eq!(limits.per_minute(Plan::Enterprise), 5000);
        assert_eq!(
            "free".parse::<RateLimits>(),
            Err(r#""free" is not plan=requests"#.to_owned())
        );
        assert_eq!(
            "gold=5".parse::<RateLimits>(),
            Err(r#""gold": must be one of: free, starter, pro, business, enterprise"#.to_owned())
        );
        assert_eq!(
            "free=0".parse::<RateLimits>(),
            Err(r#""0" is not a positive number of requests"#.to_owned())
        );
    }
}
