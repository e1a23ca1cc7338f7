//! What every handler gets: the state the router carries, and the extractors that admit a
//! request by it (a read, a mutation). The rule they apply is [`super::auth`]'s; this module
//! only hands it the parts of the state it needs.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::auth::{Auth, Operator, Reader};
use super::error::ApiError;
use crate::engine::EngineView;

/// What every handler gets.
#[derive(Clone)]
pub(crate) struct AdminState {
    /// The one view of the engine the server has.
    pub(crate) engine: EngineView,
    pub(crate) auth: Arc<Auth>,
}

impl FromRequestParts<AdminState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AdminState) -> Result<Self, ApiError> {
        state.auth.reader(parts, state.engine.metrics())
    }
}

impl FromRequestParts<AdminState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AdminState) -> Result<Self, ApiError> {
        state.auth.operator(parts, state.engine.metrics())
    }
}
