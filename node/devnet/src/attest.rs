//! Attestation requests on the devnet's Attestor (every node serves it).

use super::*;
use resolvd_node::{
    attestation,
    contracts::{AttestationRecord, IAttestor, Question, RequestTerms},
};

/// A requested attestation.
#[derive(Clone, Copy, Debug)]
pub struct OpenRequest {
    /// The question's ERC-8301 input hash.
    pub input_hash: B256,
    /// Its id at the Attestor (the `dealId` of its commitments).
    pub request_id: B256,
    /// Block of the request.
    pub block: u64,
}

impl DealContent {
    /// The question this content asks an Attestor.
    pub fn question(&self) -> Question {
        attestation::question(
            &self.spec.to_canonical_bytes(),
            &self.anchor.to_canonical_bytes(),
            &self.delivery.to_canonical_bytes(),
        )
        .expect("devnet content is well-formed")
    }
}

impl Devnet {
    /// The buyer asks the Attestor about `content` (published on chain),
    /// paying the devnet's resolver fee, answered within `window` seconds;
    /// the witness goes to the nodes in `witness_to` only (none: nobody can
    /// replay, the request times out).
    pub async fn request_attestation(
        &self,
        content: &DealContent,
        witness_to: &[usize],
        window: u64,
    ) -> eyre::Result<OpenRequest> {
        let witness = content.witness.to_canonical_bytes();
        for &i in witness_to {
            let status = self.nodes[i]
                .put_content("evm-witness", content.witness.content_hash(), witness.clone())
                .await?;
            ensure!(status == 201, "node {i} refused the witness: HTTP {status}");
        }
        let question = content.question();
        let input_hash = attestation::input_hash(&question);
        let call = IAttestor::requestCall {
            question,
            terms: RequestTerms {
                token: self.deployment.token,
                fee: U256::from(self.options.resolver_fee),
                resolveWindow: U256::from(window),
            },
            spec: content.spec.to_canonical_bytes().into(),
            prestateAnchor: content.anchor.to_canonical_bytes().into(),
            delivery: content.delivery.to_canonical_bytes().into(),
        };
        let receipt =
            call_from(&self.provider, self.accounts[1], self.deployment.attestor, call).await?;
        let request_id = attestation::request_id(
            self.provider.get_chain_id().await?,
            self.deployment.attestor,
            input_hash,
        );
        Ok(OpenRequest { input_hash, request_id, block: receipt.block_number.unwrap_or_default() })
    }

    /// Waits until the Attestor answered `input_hash` in a mined block (its
    /// `Attested` log) and returns the record.
    pub async fn wait_attested(
        &self,
        input_hash: B256,
        timeout: Duration,
    ) -> eyre::Result<AttestationRecord> {
        use alloy_sol_types::SolEvent;
        let deadline = Instant::now() + timeout;
        let attested = alloy_rpc_types_eth::Filter::new()
            .address(self.deployment.attestor)
            .event_signature(IAttestor::Attested::SIGNATURE_HASH)
            .topic2(input_hash)
            .from_block(0u64);
        loop {
            if !self.provider.get_logs(&attested).await?.is_empty() {
                let call = IAttestor::attestationCall { inputHash: input_hash };
                return self.view(self.deployment.attestor, call).await;
            }
            ensure!(Instant::now() < deadline, "{input_hash} not attested within {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
