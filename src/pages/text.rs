//! The hosted pages' words, in one table per language, and amounts written the way a buyer
//! of that language reads them. English, German and French; a page asks [`choose`]
//! with the payment's own `locale`, if any, else the buyer's `Accept-Language`.

use serde::Serialize;

pub use payd_model::locale::Locale;

/// The payment's `locale` when it has one, else the best of the buyer's `Accept-Language` (by
/// its weights, first listed first among equals) the pages speak, else English.
pub fn choose(payment: Option<Locale>, accept_language: Option<&str>) -> Locale {
    if let Some(l) = payment {
        return l;
    }
    let mut best: Option<(f32, Locale)> = None;
    for part in accept_language.unwrap_or_default().split(',') {
        let mut pieces = part.split(';');
        let Some(l) = pieces.next().and_then(Locale::of_tag) else {
            continue;
        };
        let q = pieces
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1.0), |q| q.trim().parse::<f32>().ok())
            .unwrap_or(0.0);
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, l));
        }
    }
    best.map_or(Locale::En, |(_, l)| l)
}

/// What a language's pages say, and how it writes an amount.
pub trait Words {
    fn text(self) -> &'static Text;

    /// `minor` units of `currency` as this language writes an amount: `€1,234.56`,
    /// `1.234,56 €`, `1 234,56 €`; a currency without a common symbol by its code.
    fn amount(self, minor: i64, currency: &str) -> String;
}

impl Words for Locale {
    fn text(self) -> &'static Text {
        match self {
            Locale::En => &EN,
            Locale::De => &DE,
            Locale::Fr => &FR,
        }
    }

    fn amount(self, minor: i64, currency: &str) -> String {
        let plain = crate::fields::display_amount(minor.abs(), currency);
        let (units, cents) = plain.split_once('.').unwrap_or((plain.as_str(), ""));
        let (group, decimal) = match self {
            Locale::En => (",", "."),
            Locale::De => (".", ","),
            Locale::Fr => ("\u{202f}", ","),
        };
        let mut number = String::new();
        for (i, c) in units.chars().enumerate() {
            if i > 0 && (units.len() - i) % 3 == 0 {
                number.push_str(group);
            }
            number.push(c);
        }
        if !cents.is_empty() {
            number.push_str(decimal);
            number.push_str(cents);
        }
        let sign = if minor < 0 { "-" } else { "" };
        let symbol = match currency.to_ascii_uppercase().as_str() {
            "EUR" => Some("€"),
            "USD" => Some("$"),
            "GBP" => Some("£"),
            "JPY" => Some("¥"),
            _ => None,
        };
        match (self, symbol) {
            (Locale::En, Some(s)) => format!("{sign}{s}{number}"),
            (Locale::En, None) => format!("{sign}{} {number}", currency.to_ascii_uppercase()),
            (_, s) => format!(
                "{sign}{number}\u{a0}{}",
                s.map_or_else(|| currency.to_ascii_uppercase(), str::to_owned)
            ),
        }
    }
}

/// Every string of the hosted pages in one language. `{amount}`, `{status}` and `{n}` are
/// filled in by the page; the script gets the whole table.
#[derive(Debug, Serialize)]
pub struct Text {
    pub pay: &'static str,
    pub sandbox: &'static str,
    pub card_number: &'static str,
    pub expiry: &'static str,
    pub cvc: &'static str,
    pub total: &'static str,
    pub reference: &'static str,
    pub amount: &'static str,
    pub paid_to: &'static str,
    pub status: &'static str,
    pub return_to_shop: &'static str,
    pub order: &'static str,
    pub paying: &'static str,
    pub number_missing: &'static str,
    pub number_invalid: &'static str,
    pub exp_missing: &'static str,
    pub exp_invalid: &'static str,
    pub exp_past: &'static str,
    pub cvc_missing: &'static str,
    pub cvc_invalid: &'static str,
    pub declined: &'static str,
    pub declined_insufficient_funds: &'static str,
    pub declined_expired_card: &'static str,
    pub declined_incorrect_cvc: &'static str,
    pub declined_authentication_failed: &'static str,
    pub paid: &'static str,
    pub received: &'static str,
    pub status_paid: &'static str,
    pub status_processing: &'static str,
    pub cannot_pay: &'static str,
    pub network: &'static str,
    pub failed: &'static str,
    pub challenge_title: &'static str,
    pub challenge_intro: &'static str,
    pub approve: &'static str,
    pub reject: &'static str,
    pub bank_intro: &'static str,
    pub to_bank: &'static str,
    pub challenge_closed: &'static str,
    pub back_to_payment: &'static str,
}

impl Text {
    /// `template` with `{amount}` replaced.
    pub fn with_amount(template: &str, amount: &str) -> String {
        template.replace("{amount}", amount)
    }

    /// `template` with `{status}` replaced.
    pub fn with_status(template: &str, status: &str) -> String {
        template.replace("{status}", status)
    }
}

pub static EN: Text = Text {
    pay: "Pay {amount}",
    sandbox: "Sandbox payment: use a test card. No money moves.",
    card_number: "Card number",
    expiry: "Expiry date (MM / YY)",
    cvc: "Security code (CVC)",
    total: "Total",
    reference: "Reference",
    amount: "Amount",
    paid_to: "Paid to",
    status: "Status",
    return_to_shop: "Return to the shop",
    order: "Your order",
    paying: "Paying…",
    number_missing: "Enter your card number.",
    number_invalid: "This card number is not valid. Check it and try again.",
    exp_missing: "Enter the expiry date.",
    exp_invalid: "Enter the expiry date as MM / YY.",
    exp_past: "This card has expired.",
    cvc_missing: "Enter the security code.",
    cvc_invalid: "The security code has {n} digits.",
    declined: "Your card was declined. Try another card.",
    declined_insufficient_funds: "Your card has insufficient funds. Try another card.",
    declined_expired_card: "Your card has expired. Try another card.",
    declined_incorrect_cvc: "The security code is incorrect. Check it and try again.",
    declined_authentication_failed:
        "Your bank could not confirm the payment. Try again or use another card.",
    paid: "Payment successful",
    received: "Payment received",
    status_paid: "Paid",
    status_processing: "Being processed",
    cannot_pay: "This payment can no longer be paid.",
    network: "The connection failed. Check your connection and try again.",
    failed: "Something went wrong. Try again.",
    challenge_title: "Confirm your payment of {amount}",
    challenge_intro: "This is the sandbox's 3-D Secure challenge. Choose how the bank answers.",
    approve: "Complete authentication",
    reject: "Fail authentication",
    bank_intro: "Your bank asks you to confirm this payment. You will go to your bank's page and \
         come back here.",
    to_bank: "Continue to your bank",
    challenge_closed: "This payment no longer waits for authentication: it is {status}.",
    back_to_payment: "Back to the payment",
};

pub static DE: Text = Text {
    pay: "{amount} zahlen",
    sandbox: "Testzahlung: Verwenden Sie eine Testkarte. Es wird kein Geld bewegt.",
    card_number: "Kartennummer",
    expiry: "Ablaufdatum (MM / JJ)",
    cvc: "Prüfnummer (CVC)",
    total: "Gesamt",
    reference: "Referenz",
    amount: "Betrag",
    paid_to: "Empfänger",
    status: "Status",
    return_to_shop: "Zurück zum Shop",
    order: "Ihre Bestellung",
    paying: "Zahlung läuft…",
    number_missing: "Geben Sie Ihre Kartennummer ein.",
    number_invalid: "Diese Kartennummer ist ungültig. Bitte prüfen Sie sie.",
    exp_missing: "Geben Sie das Ablaufdatum ein.",
    exp_invalid: "Geben Sie das Ablaufdatum als MM / JJ ein.",
    exp_past: "Diese Karte ist abgelaufen.",
    cvc_missing: "Geben Sie die Prüfnummer ein.",
    cvc_invalid: "Die Prüfnummer hat {n} Ziffern.",
    declined: "Ihre Karte wurde abgelehnt. Versuchen Sie es mit einer anderen Karte.",
    declined_insufficient_funds:
        "Ihre Karte ist nicht ausreichend gedeckt. Versuchen Sie es mit einer anderen Karte.",
    declined_expired_card: "Ihre Karte ist abgelaufen. Versuchen Sie es mit einer anderen Karte.",
    declined_incorrect_cvc: "Die Prüfnummer ist falsch. Bitte prüfen Sie sie.",
    declined_authentication_failed: "Ihre Bank konnte die Zahlung nicht bestätigen. Versuchen \
         Sie es erneut oder verwenden Sie eine andere Karte.",
    paid: "Zahlung erfolgreich",
    received: "Zahlung eingegangen",
    status_paid: "Bezahlt",
    status_processing: "Wird bearbeitet",
    cannot_pay: "Diese Zahlung kann nicht mehr bezahlt werden.",
    network: "Die Verbindung ist fehlgeschlagen. Prüfen Sie Ihre Verbindung und versuchen Sie \
         es erneut.",
    failed: "Etwas ist schiefgelaufen. Versuchen Sie es erneut.",
    challenge_title: "Bestätigen Sie Ihre Zahlung über {amount}",
    challenge_intro: "Dies ist die 3-D-Secure-Abfrage der Sandbox. Wählen Sie die Antwort der \
         Bank.",
    approve: "Authentifizierung abschließen",
    reject: "Authentifizierung ablehnen",
    bank_intro: "Ihre Bank bittet Sie, diese Zahlung zu bestätigen. Sie gelangen zur Seite Ihrer \
         Bank und danach hierher zurück.",
    to_bank: "Weiter zu Ihrer Bank",
    challenge_closed:
        "Diese Zahlung wartet nicht mehr auf eine Authentifizierung (Status: {status}).",
    back_to_payment: "Zurück zur Zahlung",
};

pub static FR: Text = Text {
    pay: "Payer {amount}",
    sandbox: "Paiement de test : utilisez une carte de test. Aucun argent n’est débité.",
    card_number: "Numéro de carte",
    expiry: "Date d’expiration (MM / AA)",
    cvc: "Cryptogramme (CVC)",
    total: "Total",
    reference: "Référence",
    amount: "Montant",
    paid_to: "Bénéficiaire",
    status: "Statut",
    return_to_shop: "Retour à la boutique",
    order: "Votre commande",
    paying: "Paiement en cours…",
    number_missing: "Saisissez votre numéro de carte.",
    number_invalid: "Ce numéro de carte n’est pas valide. Vérifiez-le et réessayez.",
    exp_missing: "Saisissez la date d’expiration.",
    exp_invalid: "Saisissez la date d’expiration au format MM / AA.",
    exp_past: "Cette carte a expiré.",
    cvc_missing: "Saisissez le cryptogramme.",
    cvc_invalid: "Le cryptogramme comporte {n} chiffres.",
    declined: "Votre carte a été refusée. Essayez avec une autre carte.",
    declined_insufficient_funds:
        "Le solde de votre carte est insuffisant. Essayez avec une autre carte.",
    declined_expired_card: "Votre carte a expiré. Essayez avec une autre carte.",
    declined_incorrect_cvc: "Le cryptogramme est incorrect. Vérifiez-le et réessayez.",
    declined_authentication_failed: "Votre banque n’a pas pu confirmer le paiement. Réessayez \
         ou utilisez une autre carte.",
    paid: "Paiement réussi",
    received: "Paiement reçu",
    status_paid: "Payé",
    status_processing: "En cours de traitement",
    cannot_pay: "Ce paiement ne peut plus être réglé.",
    network: "La connexion a échoué. Vérifiez votre connexion et réessayez.",
    failed: "Une erreur s’est produite. Réessayez.",
    challenge_title: "Confirmez votre paiement de {amount}",
    challenge_intro: "Ceci est la vérification 3-D Secure du bac à sable. Choisissez la réponse \
         de la banque.",
    approve: "Valider l’authentification",
    reject: "Refuser l’authentification",
    bank_intro: "Votre banque vous demande de confirmer ce paiement. Vous passerez par la page de \
         votre banque avant de revenir ici.",
    to_bank: "Continuer vers votre banque",
    challenge_closed: "Ce paiement n’attend plus d’authentification (statut : {status}).",
    back_to_payment: "Retour au paiement",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payment_locale_wins_then_the_heaviest_accepted_language_then_english() {
        assert_eq!(choose(Some(Locale::Fr), Some("de")), Locale::Fr);
        assert_eq!(choose(None, Some("es-ES,fr;q=0.5,de-AT;q=0.8")), Locale::De);
        assert_eq!(choose(None, Some("de;q=0, fr")), Locale::Fr);
        assert_eq!(choose(None, Some("es, it;q=0.9")), Locale::En);
        assert_eq!(choose(None, Some("de;q=nonsense")), Locale::En);
        assert_eq!(choose(None, None), Locale::En);
    }

    #[test]
    fn amounts_are_written_as_each_language_writes_them() {
        assert_eq!(Locale::En.amount(4599, "EUR"), "€45.99");
        assert_eq!(Locale::En.amount(123_456_789, "USD"), "$1,234,567.89");
        assert_eq!(Locale::De.amount(123_456, "EUR"), "1.234,56\u{a0}€");
        assert_eq!(Locale::Fr.amount(123_456, "EUR"), "1\u{202f}234,56\u{a0}€");
        assert_eq!(Locale::En.amount(5000, "JPY"), "¥5,000");
        assert_eq!(Locale::En.amount(4599, "SEK"), "SEK 45.99");
        assert_eq!(Locale::De.amount(4599, "sek"), "45,99\u{a0}SEK");
    }
}
