//! `gatehouse`: serve (the default), migrate, print the OpenAPI document, rotate signing keys.

use std::{io::Write, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use gatehouse_domain::model::{OrganizationId, Plan};
use gatehouse_server::{
    app::{rotate_keys, set_plan},
    telemetry, Application, Config,
};

#[derive(Parser)]
#[command(
    name = "gatehouse",
    version,
    about = "Identity, organization and webhook service"
)]
struct Cli {
    /// A TOML file of settings; `GATEHOUSE_*` environment variables override it.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (runs pending migrations first). The default.
    Serve,
    /// Run pending database migrations and exit.
    Migrate,
    /// Print the OpenAPI document.
    Openapi,
    /// Manage token-signing keys.
    Keys {
        #[command(subcommand)]
        action: KeysCommand,
    },
    /// Operator actions on organizations.
    Orgs {
        #[command(subcommand)]
        action: OrgsCommand,
    },
}

#[derive(Subcommand)]
enum OrgsCommand {
    /// Put an organization on a plan (plans are sold elsewhere); emits
    /// billing.subscription.updated.
    SetPlan {
        /// The organization's id.
        organization_id: uuid::Uuid,
        /// free, starter, pro, business or enterprise.
        plan: String,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Add a new active signing key; older keys stay published until their tokens expire.
    Rotate,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            let _ = writeln!(std::io::stderr(), "gatehouse: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let command = cli.command.unwrap_or(Command::Serve);
    if let Command::Openapi = command {
        let document = gatehouse_api::openapi::document()?;
        writeln!(std::io::stdout(), "{document}")?;
        return Ok(());
    }
    let config = Config::load(cli.config.as_deref())?;
    match command {
        Command::Serve => {
            Application::build(config)
                .await?
                .run_until_stopped()
                .await?;
        }
        Command::Migrate => {
            let applied = gatehouse_store::migrate(&config.database_url).await?;
            tracing::info!(count = applied.len(), ?applied, "migrations applied");
        }
        Command::Keys {
            action: KeysCommand::Rotate,
        } => {
            let kid = rotate_keys(&config).await?;
            writeln!(std::io::stdout(), "new signing key: {kid}")?;
        }
        Command::Orgs {
            action:
                OrgsCommand::SetPlan {
                    organization_id,
                    plan,
                },
        } => {
            let plan: Plan = plan
                .parse()
                .map_err(|e| anyhow::anyhow!("plan {plan:?} {e}"))?;
            let organization =
                set_plan(&config, OrganizationId::from_uuid(organization_id), plan).await?;
            writeln!(
                std::io::stdout(),
                "{} ({}) is now on the {} plan",
                organization.name.as_ref(),
                organization.id,
                organization.plan
            )?;
        }
        Command::Openapi => {}
    }
    Ok(())
}
